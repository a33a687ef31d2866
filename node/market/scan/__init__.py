"""The skill scanner: what a skill would put in an agent's context, read before it gets there.

Every skill is scanned before it is installed (``node.agent.skill_install``) or ingested
after a purchase (``node.market.purchase``): prompt injection aimed at the model, hidden
markup, credential access and exfiltration, download-and-execute, decode-and-execute,
invisible or deceptive Unicode, obfuscated payloads, a body that does what its
description does not say. ``scan_text`` returns a ``ScanReport`` whose verdict is
``ok``, ``warn`` or ``quarantine`` (see ``findings.verdict_for``).

The input is hostile: sizes and line lengths are capped before anything else, every
regular expression is bounded (no unbounded quantifier, checked by the tests), and a
text that is too large or a malformed bundle is refused with a ``quarantine`` verdict,
never an exception or a hang.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.scan.findings import Finding as Finding
    from node.market.scan.findings import ScanReport as ScanReport
    from node.market.scan.findings import Severity as Severity
    from node.market.scan.findings import Verdict as Verdict
    from node.market.scan.folder import WIRE_LIMITS as WIRE_LIMITS
    from node.market.scan.folder import market_bundle as market_bundle
    from node.market.scan.folder import read_folder as read_folder
    from node.market.scan.folder import scan_folder as scan_folder
    from node.market.scan.judge import EndpointSettings as EndpointSettings
    from node.market.scan.judge import Opinion as Opinion
    from node.market.scan.judge import ask_endpoint as ask_endpoint
    from node.market.scan.judge import ask_sampling as ask_sampling
    from node.market.scan.judge import judge_with_endpoint as judge_with_endpoint
    from node.market.scan.judge import not_judged as not_judged
    from node.market.scan.judge import skill_text as skill_text
    from node.market.scan.judge import with_opinion as with_opinion
    from node.market.scan.scanner import Unscannable as Unscannable
    from node.market.scan.scanner import scan_refused as scan_refused
    from node.market.scan.scanner import scan_text as scan_text

__getattr__ = face(__name__)
