"""Preferred-leader election: ELECT_LEADERS, /admin/preferred_replica_election and the
automatic rebalance on tick (leader_balance.py decides which nodes are imbalanced). A mixin of
ControllerCore."""
from __future__ import annotations

import logging
from collections.abc import Iterable

from riverbed import errors
from riverbed._proto.v1 import admin_ops_pb2
from services.controller.core import leader_balance
from services.controller.core.effects import Effect
from services.controller.core.model import TopicPartition

log = logging.getLogger(__name__)

E = errors.ErrorCode
NONE = 0


class PreferredLeaders:
    # ---- preferred leaders ---------------------------------------------------------------------
    def _elect_preferred(self, out: list[Effect], partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, tuple[int, str]]:
        """Make each partition's first replica its leader where it is live and in the ISR;
        one LEADER_AND_ISR per node for all of them."""
        results: dict[TopicPartition, tuple[int, str]] = {}
        changed: list[TopicPartition] = []
        for tp in partitions:
            t = self.topics.get(tp[0])
            if t is None or tp[1] not in t.assignment:
                results[tp] = E.Value("UNKNOWN_TOPIC_OR_PARTITION"), "unknown topic or partition"
                continue
            preferred = t.assignment[tp[1]][0]
            st = t.states.get(tp[1])
            if st is not None and st.leader == preferred:
                results[tp] = E.Value("ELECTION_NOT_NEEDED"), f"{preferred} already leads"
            elif st is None or preferred not in self._eligible() or preferred not in st.isr:
                results[tp] = (E.Value("PREFERRED_LEADER_NOT_AVAILABLE"),
                               f"preferred replica {preferred} is not live or not in the ISR")
            else:
                self._write_state_from(out, tp, (preferred, st.leader_epoch + 1, st.isr))
                changed.append(tp)
                results[tp] = NONE, ""
        self._send_leader_and_isr(out, changed)
        return results

    def _elect_leaders_request(self, req: admin_ops_pb2.ElectLeadersRequest, out: list[Effect]):
        tps = (list(dict.fromkeys((x.topic, x.partition) for x in req.partitions))
               if req.partitions else self._all_partitions())
        resp = admin_ops_pb2.ElectLeadersResponse(error_code=NONE)
        for (topic, p), (code, msg) in self._elect_preferred(out, tps).items():
            resp.results.add(topic=topic, partition=p, error_code=code, error_message=msg)
        return resp

    def preferred_balance(self) -> dict[int, leader_balance.NodeBalance]:
        return leader_balance.balance(
            (tp, self._replicas(tp), self.topics[tp[0]].states.get(tp[1]))
            for tp in self._all_partitions())

    def _auto_rebalance(self, out: list[Effect]) -> None:
        per_node = self.preferred_balance()
        nodes = leader_balance.imbalanced_nodes(
            per_node, self.config.leader_imbalance_per_broker_percentage)
        if not nodes:
            return
        tps = []
        for tp in self._all_partitions():
            st = self.topics[tp[0]].states.get(tp[1])
            preferred = self._replicas(tp)[0]
            if (preferred in nodes and tp not in self.reassignments and st is not None
                    and st.leader != preferred and preferred in st.isr
                    and preferred in self._eligible()):
                tps.append(tp)
        if tps:
            log.info("leader imbalance on nodes %s (%s): electing preferred leaders of %s",
                     nodes, {n: f"{per_node[n].not_led}/{per_node[n].preferred}" for n in nodes},
                     [f"{t}-{p}" for t, p in tps])
            self._elect_preferred(out, tps)
