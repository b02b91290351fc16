"""A minimal OTLP/HTTP receiver (traces and metrics, protobuf): the observability tests and
loadgen.obs_bench point the services' OTEL_EXPORTER_OTLP_*_ENDPOINT at it.

    r = OtlpReceiver(); env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = r.url + "/v1/traces"
    ... r.spans (dicts: service, name, trace_id, span_id, parent_id), r.metric_names ... r.close()
"""
from __future__ import annotations

import gzip
import http.server
import threading

__all__ = ["OtlpReceiver"]


class OtlpReceiver:
    """A minimal OTLP/HTTP receiver: keeps the spans and metric names it is sent."""

    def __init__(self):
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        self.spans: list[dict] = []
        self.keep_spans = True           # False: count them only (benchmarks)
        self.span_count = 0
        self.metric_names: set[str] = set()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):   # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                    for rs in req.resource_spans:
                        service = next((a.value.string_value for a in rs.resource.attributes
                                        if a.key == "service.name"), "")
                        for ss in rs.scope_spans:
                            receiver.span_count += len(ss.spans)
                            if not receiver.keep_spans:
                                continue
                            for s in ss.spans:
                                receiver.spans.append({
                                    "service": service, "name": s.name,
                                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                    "parent_id": s.parent_span_id.hex()})
                    reply = trace_service_pb2.ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    for rm in req.resource_metrics:
                        for sm in rm.scope_metrics:
                            receiver.metric_names.update(m.name for m in sm.metrics)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
