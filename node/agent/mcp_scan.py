"""``skill_scan`` over MCP: the scanner's verdict on a local skill, and the agent's own model as judge.

The scan runs in this process on the agent's machine (no node needed: the folder is local).
With ``judge=true`` the connected client's model is asked for a second opinion through MCP
sampling (``node.market.scan.judge``: one fixed prompt, bounded time and answer); a client
that offers no sampling gets "not judged" with the reason, never a silent pass. The judge
may raise ``ok`` to ``warn``; it never lowers the rules' verdict and never quarantines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.market import ScanReport, ask_sampling, not_judged, scan_folder, skill_text, with_opinion

SAMPLING_TIMEOUT_S = 120.0
JUDGE = "the agent's model (MCP sampling)"


def register_scan_tools(server: MCPServer[Any], sampling_timeout_s: float = SAMPLING_TIMEOUT_S) -> None:
    @server.tool()
    async def skill_scan(
        ctx: Context[Any, Any],
        path: Annotated[str, Field(min_length=1, max_length=4096,
                                   description="Absolute path of a skill folder (with SKILL.md) or a SKILL.md file.")],
        judge: Annotated[bool, Field(description="Also ask your own model (MCP sampling) for a second opinion.")]
        = False,
    ) -> dict[str, Any]:
        """Scan a skill before installing it: prompt injection, credential theft, download-and-run,
        hidden or encoded payloads, lures. Returns the verdict (ok, warn, quarantine, refused) with
        each finding's file, line and evidence. With judge=true your own model is asked (sampling)
        and its opinion is shown next to the rules' verdict; it can raise ok to warn, never lower."""
        folder = Path(path)
        if not folder.is_absolute():
            raise ToolError("path must be an absolute path")
        report: ScanReport = await anyio.to_thread.run_sync(scan_folder, folder)
        if not judge:
            return report.to_dict()
        text = await anyio.to_thread.run_sync(skill_text, folder)
        if text is None:
            return with_opinion(report, not_judged(JUDGE, "the scanner could not read the skill (see refused)")).to_dict()
        session = ctx.session
        if not session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
            return with_opinion(report, not_judged(JUDGE, "the connected client does not offer sampling")).to_dict()

        async def sample(system: str, user: str, max_tokens: int) -> str | None:
            with anyio.fail_after(sampling_timeout_s):
                result = await session.create_message(
                    [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=user))],
                    max_tokens=max_tokens, system_prompt=system, temperature=0)
            content = result.content
            return content.text if isinstance(content, types.TextContent) else None

        return with_opinion(report, await ask_sampling(text, sample, JUDGE)).to_dict()
