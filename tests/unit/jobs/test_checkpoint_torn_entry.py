"""drop_torn_first_entry: a query killed while Spark wrote its first offset-log entry can start
again (Spark 4 refuses a new query whose offsets directory holds any file)."""
from jobs.clickstream_events import drop_torn_first_entry

TORN = (".0.91be4e12-6f2b-4f43-8e69-591949eae64e.tmp",
        "..0.91be4e12-6f2b-4f43-8e69-591949eae64e.tmp.crc")   # as a killed driver left them


def checkpoint(tmp_path, offsets=(), commits=()):
    for sub, names in (("offsets", offsets), ("commits", commits)):
        (tmp_path / sub).mkdir()
        for name in names:
            (tmp_path / sub / name).write_text("v1\n")
    return tmp_path


def test_a_torn_first_entry_is_removed(tmp_path):
    cp = checkpoint(tmp_path, offsets=TORN)
    removed = drop_torn_first_entry(str(cp))
    assert sorted(removed) == sorted(str(cp / "offsets" / n) for n in TORN)
    assert list((cp / "offsets").iterdir()) == []
    assert drop_torn_first_entry(f"file:{cp}") == []            # a file: URI, nothing left


def test_a_query_with_a_logged_batch_is_left_to_spark(tmp_path):
    cp = checkpoint(tmp_path, offsets=("0", ".1.aaaa.tmp"), commits=("0",))
    assert drop_torn_first_entry(str(cp)) == []
    assert sorted(p.name for p in (cp / "offsets").iterdir()) == [".1.aaaa.tmp", "0"]


def test_only_spark_temporary_files_go(tmp_path):
    cp = checkpoint(tmp_path, offsets=(".keep", TORN[0]))
    assert drop_torn_first_entry(str(cp)) == [str(cp / "offsets" / TORN[0])]
    assert [p.name for p in (cp / "offsets").iterdir()] == [".keep"]


def test_no_checkpoint_yet_and_remote_ones_are_left_alone(tmp_path):
    assert drop_torn_first_entry(str(tmp_path / "absent")) == []
    assert drop_torn_first_entry("hdfs://namenode/checkpoints/clickstream") == []
