"""Build a ``WorkingMemory`` from the node's configuration."""

from __future__ import annotations

from collections.abc import Callable

from node.config import ConfigError, MemoryConfig, NodeConfig
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend
from node.memory.working.dream import ExtractiveSynthesiser, LlmSynthesiser, NicheData, Synthesiser
from node.memory.working.working import DEFAULT_NAMESPACE, WorkingMemory

SYNTHESISERS = ("extractive", "llm")


def synthesiser_for(settings: MemoryConfig) -> Synthesiser:
    """``memory.dream_synthesiser``: "extractive" (default, offline) or "llm"."""
    if settings.dream_synthesiser == "extractive":
        return ExtractiveSynthesiser()
    if settings.dream_synthesiser == "llm":
        if not settings.dream_llm_url or not settings.dream_llm_model:
            raise ConfigError("memory.dream_synthesiser = \"llm\" needs memory.dream_llm_url and "
                              "memory.dream_llm_model")
        return LlmSynthesiser(settings.dream_llm_url, settings.dream_llm_model,
                              settings.dream_llm_key_env, settings.dream_llm_timeout_s)
    raise ConfigError(f"memory.dream_synthesiser must be one of {', '.join(SYNTHESISERS)}, "
                      f"not {settings.dream_synthesiser!r}")


def working_memory_for(config: NodeConfig, memory: Memory, namespace: str = DEFAULT_NAMESPACE,
                       niche: Callable[[], NicheData | None] | None = None,
                       backend: MemoryBackend | None = None) -> WorkingMemory:
    return WorkingMemory(config.data_dir, backend or MemoryBackend(memory, namespace=namespace), namespace,
                         synthesiser_for(config.memory), config.memory.min_chunks_for_dream, niche)
