"""Read a config.json the many ways models spell it, into one typed view.

Configs name the same thing differently (``hidden_size``, ``n_embd``,
``d_model``; ``num_key_value_heads``, ``n_head_kv``, ``num_kv_heads``,
``multi_query_group_num``), and multimodal wrappers keep the language model
under ``text_config`` or ``llm_config``. :class:`ConfigView` hides that:
it reads the language model's keys first and the wrapper's second, and its
getters validate types so a hostile config gives a typed error, never a
``TypeError`` deep inside the planner, and every count is checked against its
key's plausible maximum (:func:`explorer.limits.check_count`) before a layer
is built: 10^7 layers is refused at once, not built in a minute and a GiB.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from explorer.errors import ConfigError, InvalidConfigValueError, MissingConfigKeysError, NotAModelConfigError
from explorer.limits import check_count, load_json
from explorer.model.config_defaults import with_class_defaults

#: keys under which wrappers keep their language model's config
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "text_model_config")

#: keys under which wrappers keep their vision tower's config
VISION_CONFIG_KEYS = ("vision_config", "visual", "vision_tower_config")

# Aliases, most common spelling first. Source: the fixture configs
# (GPT-2, Falcon/RefinedWeb, ChatGLM, Qwen v1, BigCode, Nemotron-H...).
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads"),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size", "padded_vocab_size", "n_vocab", "embedding_size"),
    "max_positions": (
        "max_position_embeddings",
        "n_positions",
        "max_sequence_length",
        "seq_length",
        "n_ctx",
        "max_seq_len",
    ),
    "head_dim": ("head_dim", "kv_channels", "attention_head_dim", "head_size"),
}


def parse_config_text(text: str | bytes, *, where: str = "config.json") -> dict[str, Any]:
    """Parse config.json text (NaN/Infinity allowed, as Python's json does).

    Raises:
        ConfigError: the text is not UTF-8, not JSON, or nested deeper than ``explorer.limits.MAX_JSON_DEPTH``.
        NotAModelConfigError: it is JSON but not an object.
    """
    data = load_json(text, where=where, error=ConfigError, hint="check the file is a config.json")
    if not isinstance(data, dict):
        raise NotAModelConfigError(f"{where} holds a JSON {type(data).__name__}, not an object")
    return data


def whole_number(value: Any, key: str, *, where: str, minimum: int = 0) -> int:
    """A config value that must be a whole number (integral floats accepted), ``>= minimum`` and at most the
    key's plausible maximum (:func:`explorer.limits.plausible_max`); the one check of every count a config
    holds, nested blocks (``quantization_config``) included.

    Raises:
        InvalidConfigValueError: a string, a list, an object, a bool, NaN, a fraction, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidConfigValueError(f"{where}: {key} must be a number, got {safe_repr(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise InvalidConfigValueError(f"{where}: {key} must be a whole number, got {value!r}")
        value = int(value)
    if value < minimum:
        raise InvalidConfigValueError(f"{where}: {key} must be ≥ {minimum}, got {value}")
    return check_count(value, key, where=where, error=InvalidConfigValueError, minimum=minimum)


def safe_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a hostile value may be a megabyte)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class ConfigView:
    """The language model's keys, with the wrapper's beneath them.

    Attributes:
        text: the language model's own dict (``text_config`` when nested).
        outer: the whole config.json dict.
        where: a label for messages (the file or repo).
    """

    text: Mapping[str, Any]
    outer: Mapping[str, Any]
    where: str = "config.json"
    defaults_filled: tuple[str, ...] = ()
    _missing: list[str] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def of(cls, config: Mapping[str, Any], where: str = "config.json") -> ConfigView:
        """Build a view, descending into ``text_config``/``llm_config`` when present.

        A nested config that names only its overrides is filled from its
        transformers config class's defaults, as transformers does.
        """
        if not isinstance(config, Mapping):
            raise NotAModelConfigError(f"{where} is a {type(config).__name__}, not a JSON object")
        for key in TEXT_CONFIG_KEYS:
            inner = config.get(key)
            if isinstance(inner, Mapping) and inner:
                model_type = inner.get("model_type")
                filled: list[str] = []
                if isinstance(model_type, str):
                    inner, filled = with_class_defaults(dict(inner), model_type)
                return cls(text=inner, outer=config, where=where, defaults_filled=tuple(filled))
        return cls(text=config, outer=config, where=where)

    @property
    def nested(self) -> bool:
        """Whether the language model sits under a ``text_config``-like key."""
        return self.text is not self.outer

    def raw(self, *keys: str, default: Any = None) -> Any:
        """The first present, non-null value of ``keys``: text config first, then the wrapper."""
        for source in (self.text, self.outer) if self.nested else (self.text,):
            for key in keys:
                value = source.get(key)
                if value is not None:
                    return value
        return default

    def get_int(self, *keys: str, default: int | None = None, minimum: int = 0) -> int | None:
        """An integer value (accepting integral floats), validated ``>= minimum`` and at most the key's
        plausible maximum (:func:`explorer.limits.plausible_max`)."""
        value = self.raw(*keys)
        if value is None:
            return default
        return whole_number(value, keys[0], where=self.where, minimum=minimum)

    def get_float(self, *keys: str, default: float | None = None) -> float | None:
        """A finite float value."""
        value = self.raw(*keys)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidConfigValueError(f"{self.where}: {keys[0]} must be a finite number, got {value!r}")
        return float(value)

    def get_bool(self, *keys: str, default: bool = False) -> bool:
        """A boolean value (JSON true/false; 0/1 accepted)."""
        value = self.raw(*keys)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise InvalidConfigValueError(f"{self.where}: {keys[0]} must be true or false, got {value!r}")

    def get_str(self, *keys: str, default: str | None = None) -> str | None:
        """A string value."""
        value = self.raw(*keys)
        if value is None:
            return default
        if not isinstance(value, str):
            raise InvalidConfigValueError(f"{self.where}: {keys[0]} must be a string, got {value!r}")
        return value

    def get_list(self, *keys: str) -> list | None:
        """A list value, or None."""
        value = self.raw(*keys)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidConfigValueError(f"{self.where}: {keys[0]} must be a list, got {type(value).__name__}")
        return value

    def get_dict(self, *keys: str) -> Mapping[str, Any] | None:
        """A dict value, or None."""
        value = self.raw(*keys)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidConfigValueError(f"{self.where}: {keys[0]} must be an object, got {type(value).__name__}")
        return value

    def alias_int(self, name: str, default: int | None = None, minimum: int = 0) -> int | None:
        """An integer under any spelling listed in :data:`ALIASES`."""
        return self.get_int(*ALIASES[name], default=default, minimum=minimum)

    def require(self, name: str, minimum: int = 1) -> int:
        """Like :meth:`alias_int`, but a missing key is recorded for one combined error."""
        value = self.alias_int(name, minimum=minimum)
        if value is None:
            self._missing.append("|".join(ALIASES[name][:3]))
            return 0
        return value

    def raise_if_missing(self) -> None:
        """Raise one error naming every key :meth:`require` did not find."""
        if self._missing:
            missing = list(dict.fromkeys(self._missing))
            self._missing.clear()
            raise MissingConfigKeysError(missing, where=self.where)

    def vision(self) -> Mapping[str, Any] | None:
        """The vision tower's config dict, if the model has one."""
        for key in VISION_CONFIG_KEYS:
            value = self.outer.get(key)
            if isinstance(value, Mapping) and value:
                return value
        return None

    def model_type(self) -> str:
        """The wrapper's model_type (``gemma3``), falling back to the text model's."""
        for source in (self.outer, self.text):
            value = source.get("model_type")
            if isinstance(value, str) and value:
                return value
        return ""

    def text_model_type(self) -> str:
        """The language model's own model_type (``gemma3_text``)."""
        value = self.text.get("model_type")
        return value if isinstance(value, str) and value else self.model_type()

    def remote_code(self) -> bool:
        """Whether the config names its repository's own code (a non-empty ``auto_map``: Kimi-K2.5's
        ``configuration_kimi_k25.KimiK25Config``), which transformers runs only when told to trust it."""
        auto_map = self.outer.get("auto_map")
        return isinstance(auto_map, Mapping) and bool(auto_map)

    def architecture(self) -> str:
        """The first of ``architectures``, or ``""``."""
        archs = self.outer.get("architectures") or self.text.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str):
            return archs[0]
        return ""


def looks_like_model_config(config: Mapping[str, Any]) -> bool:
    """Whether a dict has anything of a transformer config (a size, layers or a model_type)."""
    view = ConfigView.of(config)
    keys = set(view.text) | set(view.outer)
    markers = {"model_type", "architectures"} | set(ALIASES["hidden_size"]) | set(ALIASES["layers"])
    return bool(keys & markers)


def require_model_config(config: Any, where: str = "config.json") -> ConfigView:
    """A :class:`ConfigView`, or a :class:`NotAModelConfigError` saying why not."""
    if not isinstance(config, Mapping):
        raise NotAModelConfigError(f"{where} is a {type(config).__name__}, not a JSON object")
    if not looks_like_model_config(config):
        # its keys are not named: the file may be anyone's (a Docker config.json's "auths"), not a model's
        raise NotAModelConfigError(
            f"{where} is not a model config: none of its {len(config):,} keys is a model_type, architectures, "
            "hidden size or layer count",
            hint="pass the model's config.json",
        )
    return ConfigView.of(config, where=where)


__all__ = [
    "ConfigError",
    "ConfigView",
    "looks_like_model_config",
    "parse_config_text",
    "require_model_config",
    "whole_number",
]
