"""What the conversation and session-transcript tests share: files in each shape the node reads
(LoCoMo and plain conversations, Claude Code / Codex / messages transcripts), a Claude Code
settings file, the LoCoMo scoring, and a fault launcher that kills a transcript ingest mid-way."""
