import pytest

from services.gateway.core.topic_names import is_valid_topic_name, topic_name_error


@pytest.mark.parametrize("name", ["a", "orders", "A.b_c-9", "x" * 249, "..a", "._"])
def test_legal(name):
    assert is_valid_topic_name(name) and topic_name_error(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a\n", "a*"])
def test_illegal(name):
    assert not is_valid_topic_name(name)
    assert topic_name_error(name)
