"""node.net.libp2p_compat: the py-libp2p private members the node relies on still exist.

An upgrade of py-libp2p that renames or drops one fails here, naming the member and
the module that uses it, instead of failing at run time on a relay or a DHT lookup.
"""

from __future__ import annotations

from importlib.metadata import version

from node.net import libp2p_compat
from node.net.libp2p_compat import PRIVATE_MEMBERS, PrivateMember, missing_members


def test_the_installed_py_libp2p_is_the_version_the_list_was_checked_against() -> None:
    assert version("libp2p") == libp2p_compat.CHECKED_VERSION, (
        "py-libp2p changed: check every entry of node.net.libp2p_compat.PRIVATE_MEMBERS "
        "(and node.net.libp2p_tuning's patches), then bump CHECKED_VERSION")


def test_every_listed_private_member_exists() -> None:
    assert missing_members() == []


def test_a_member_that_is_gone_is_reported() -> None:
    gone = PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_no_such_member", "tests", "a probe")
    instance_only = next(m for m in PRIVATE_MEMBERS if m.name == "_reservations")
    no_class = PrivateMember("libp2p.pubsub.pubsub:NoSuchClass", "_x", "tests", "a probe")
    module_level = next(m for m in PRIVATE_MEMBERS if m.name == "_yamux_data_read_timeout")
    gone_from_module = PrivateMember("libp2p.stream_muxer.yamux.yamux", "_no_such_function",
                                     "tests", "a probe")
    assert missing_members((gone, instance_only, no_class, module_level, gone_from_module)) == [
        gone, no_class, gone_from_module]


def test_every_function_of_the_module_uses_a_listed_member() -> None:
    """A use added without its entry would escape the check above."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(libp2p_compat))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_")
            and not node.attr.startswith("__")}
    assert used <= {member.name for member in PRIVATE_MEMBERS}
