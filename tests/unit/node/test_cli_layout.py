"""The CLI has one registration style and one way to reach the node (issue 25, item 3).

Every command is registered ``@group.command`` in its group's file (no callback
replaced after the fact, no ``add_command`` of a function defined elsewhere;
``node/cli/main.py`` only adds the groups), no ``/v1/`` path is spelled outside
``node/api`` (everything else calls the typed client), and the local adapter
answers with exactly the typed client's signatures and writes no operation of its
own: its methods only pass arguments on (no branch, loop or handler). That both
answer the same JSON is tested by running them: tests/integration/cli/test_cli_contract.py.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import click

from node.api.client import ApiClient
from node.cli.local import LocalNode
from node.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
CLI_DIR = ROOT / "node" / "cli"
GROUP_FILES = {"node", "memory", "skill", "market", "bounty", "wallet", "weather", "trust", "devnet",
               "models", "mcp", "hook", "integrate"}
# Group files in a wing of node/cli (a folder by concept): the agent-host commands.
WINGS = ("hosts",)


def _module_of(command: click.Command) -> str:
    assert command.callback is not None, command.name
    return command.callback.__module__


def _tree(group: click.Group, path: str) -> list[tuple[str, click.Command, click.Group]]:
    found = []
    for name, command in group.commands.items():
        found.append((f"{path} {name}".strip(), command, group))
        if isinstance(command, click.Group):
            found += _tree(command, f"{path} {name}")
    return found


def test_every_command_is_registered_in_its_groups_file() -> None:
    assert _module_of(cli) == "node.cli.node"
    wrong = []
    for path, command, group in _tree(cli, ""):
        if group is cli:
            # the root's own commands sit with the root group; a group (or mcp) in its own file
            expected = {"node.cli.node", f"node.cli.{command.name}",
                        *(f"node.cli.{wing}.{command.name}" for wing in WINGS)}
        else:
            expected = {_module_of(group)}
        if _module_of(command) not in expected:
            wrong.append(f"{path}: {_module_of(command)}")
    assert wrong == []
    files = {_module_of(command).rsplit(".", 1)[1] for _, command, _ in _tree(cli, "")}
    assert files == GROUP_FILES


def _decorator_target(decorator: ast.expr) -> str | None:
    """``X`` of ``@X.command(...)`` / ``@X.group(...)`` (None for ``@click.command`` and the rest)."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(call, ast.Attribute) and call.attr in ("command", "group") and isinstance(call.value, ast.Name):
        return None if call.value.id == "click" else call.value.id
    return None


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    groups = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
              and any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "group"
                      for d in node.decorator_list)}
    found = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = _decorator_target(decorator)
                if target is not None and target not in groups:
                    found.append(f"{where}: {node.name} registered on {target}, a group of another file")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_command" \
                and path.name != "main.py":
            found.append(f"{where}: add_command outside main.py")
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in ("callback", "params", "commands"):
                found.append(f"{where}: a command's {target.attr} patched")
    return found


def test_no_command_is_registered_or_patched_outside_its_group() -> None:
    assert [v for path in sorted(CLI_DIR.rglob("*.py")) for v in _violations(path)] == []


def test_the_checks_see_a_patched_callback_and_a_foreign_registration(tmp_path: Path) -> None:
    """The static check itself: what the old CLI did is reported."""
    bad = tmp_path / "probe.py"
    bad.write_text("from node.cli.memory import memory\n\n"
                   "@memory.command('x')\ndef x() -> None: ...\n\n"
                   "memory.commands['context'].callback = x\n"
                   "memory.commands['context'].params[:0] = []\n"
                   "memory.add_command(x)\n")
    assert len(_violations(bad)) == 4, _violations(bad)


def test_no_v1_path_outside_node_api() -> None:
    spelled = [f"{path.relative_to(ROOT)}:{number}"
               for path in sorted((ROOT / "node").rglob("*.py")) if "api" not in path.relative_to(ROOT).parts[1:2]
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "/v1/" in line]
    assert spelled == []


def test_the_local_adapter_has_the_typed_clients_signatures() -> None:
    local = {name for name, _ in inspect.getmembers(LocalNode, inspect.isfunction) if not name.startswith("_")}
    local.discard("close")
    assert local and local <= set(dir(ApiClient))
    for name in sorted(local):
        assert inspect.signature(getattr(LocalNode, name)) == inspect.signature(getattr(ApiClient, name)), name


def _control_flow(function: ast.FunctionDef) -> list[str]:
    """Statements that make a method a second body of an operation rather than a hand-over."""
    kinds = (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.IfExp, ast.ListComp, ast.DictComp, ast.Match)
    return [f"{function.name}:{node.lineno} {type(node).__name__}" for node in ast.walk(function)
            if isinstance(node, kinds) and not (isinstance(node, ast.ListComp) and _serialises(node))]


def _serialises(comprehension: ast.ListComp) -> bool:
    """``[x.to_dict() for x in ...]``: the answer's JSON, as the node's face writes it (typed
    with ``cast(shape, x.to_dict())`` or not)."""
    element = comprehension.elt
    if (isinstance(element, ast.Call) and isinstance(element.func, ast.Name) and element.func.id == "cast"
            and len(element.args) == 2):
        element = element.args[1]
    return (isinstance(element, ast.Call) and isinstance(element.func, ast.Attribute)
            and element.func.attr == "to_dict")


def test_the_local_adapter_only_hands_over_to_the_operations() -> None:
    tree = ast.parse((CLI_DIR / "local.py").read_text(encoding="utf-8"))
    local = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "LocalNode")
    methods = [node for node in local.body if isinstance(node, ast.FunctionDef)
               and not node.name.startswith("_") and node.name != "close"]
    assert methods and [finding for method in methods for finding in _control_flow(method)] == []
