"""Parts from the user's own code, named in a config by ``_target_`` (Hydra's convention).

:func:`locate` imports ``module.Name`` (the working directory last on ``sys.path``, so a
user's ``pandas.py`` shadows no library), :func:`call_params` picks the keys of its config
that its signature takes, and :func:`check_protocol` checks what it built against a
``Protocol``; every miss is one :class:`~evidence_bench.errors.ConfigurationError` line
starting with the config key.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from evidence_bench.errors import ConfigurationError

__all__ = [
    "TARGET", "build", "call_params", "check_protocol", "frozen", "locate", "signature_text",
    "thawed",
]  # fmt: skip

#: The config key that names a user's class or function.
TARGET = "_target_"


def locate(where: str, target: object) -> Callable[..., Any]:
    """The class or function ``target`` (``module.Name``) names; ``where``: the config key
    (``ranker``, ``policies.mine``), which every error names."""
    at = f"{where}.{TARGET}={target}"
    if not isinstance(target, str) or "." not in target.strip("."):
        raise ConfigurationError(f"{at}: not an import path of the form module.Name")
    cwd = os.getcwd()
    if cwd not in sys.path:  # last: a user's pandas.py must not shadow the library
        sys.path.append(cwd)
    module_name, _, attribute = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        inside = "" if module_name.startswith(missing) else f" (imported by {module_name!r})"
        raise ConfigurationError(
            f"{at}: no module named {missing!r}{inside}; sys.path: {os.pathsep.join(sys.path)}"
        ) from exc
    except Exception as exc:  # the user's module failed while it was imported
        raise ConfigurationError(
            f"{at}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise ConfigurationError(f"{at}: module {module_name!r} has no {attribute!r}")
    if not callable(found):
        raise ConfigurationError(f"{at}: {attribute!r} is not a class or function")
    return found  # type: ignore[no-any-return]


def _taken(factory: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword parameters ``factory`` takes; None: any (``**kwargs``, or unreadable)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in kinds)


def call_params(
    where: str,
    conf: Mapping[str, Any],
    *,
    harness: Collection[str],
    defaults: Mapping[str, Any],
    offered: Collection[str] = (),
) -> tuple[tuple[str, Any], ...]:
    """The keyword arguments the target of ``conf`` is called with: the keys of ``conf`` its
    signature takes, in config order, but ``harness``'s (applied by the package itself),
    and ``offered``'s only where it names them.

    A key the target does not take is refused unless it is a schema key at its default
    (``defaults``), so ``ranker.k2=0.5`` for a ranker without ``k2`` fails instead of being
    dropped; a target taking ``**kwargs`` is given the keys that are not the schema's.
    """
    target = str(conf[TARGET])
    taken = _taken(locate(where, target))
    params: list[tuple[str, Any]] = []
    for key, value in conf.items():
        if key in harness or key == TARGET:
            continue
        if (taken is not None and key in taken) or (taken is None and key not in defaults):
            params.append((key, value))
        elif key in offered:
            continue
        elif key not in defaults or value != defaults[key]:
            takes = ", ".join(sorted(taken or ())) or "nothing"
            raise ConfigurationError(
                f"{where}.{key}={value!r}: {target} takes no parameter {key!r} (it takes: {takes})"
            )
    return tuple(params)


def build(
    where: str,
    target: str,
    params: tuple[tuple[str, Any], ...],
    given: Mapping[str, Any] | None = None,
) -> Any:
    """``target`` called with ``params`` (lists, which a frozen config holds as tuples,
    as lists again), and with those of ``given`` (what the harness offers, such as the
    collection) its signature takes."""
    factory = locate(where, target)
    taken = _taken(factory)
    offered = {k: v for k, v in (given or {}).items() if taken is None or k in taken}
    try:
        return factory(**{key: thawed(value) for key, value in params}, **offered)
    except Exception as exc:  # the user's constructor refused its parameters
        raise ConfigurationError(f"{where}.{TARGET}={target}: {type(exc).__name__}: {exc}") from exc


def _members(protocol: type) -> tuple[list[str], dict[str, inspect.Signature]]:
    """A Protocol's attributes (annotated names, properties) and methods with signatures."""
    attributes = [name for name in getattr(protocol, "__annotations__", {}) if name[0] != "_"]
    methods: dict[str, inspect.Signature] = {}
    for name, member in vars(protocol).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            attributes.append(name)
        elif inspect.isfunction(member):
            methods[name] = inspect.signature(member)
    return attributes, methods


def signature_text(name: str, signature: inspect.Signature) -> str:
    """``rank(query, candidates, feedback)``: a protocol method's call as a user writes it."""
    shown: list[str] = []
    for parameter in list(signature.parameters.values())[1:]:  # without self
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and "*" not in shown:
            shown.append("*")
        shown.append(parameter.name)
    return f"{name}({', '.join(shown)})"


def check_protocol(where: str, target: str, part: object, protocol: type) -> None:
    """``part`` has every attribute and method of ``protocol``, each method taking the
    protocol's arguments (positional ones by position, keyword-only ones by name)."""
    at = f"{where}.{TARGET}={target}"
    attributes, methods = _members(protocol)
    for name, signature in methods.items():
        method = getattr(part, name, None)
        wanted = signature_text(name, signature)
        if not callable(method):
            raise ConfigurationError(f"{at}: no method {wanted}")
        parameters = list(signature.parameters.values())[1:]
        positional = [p.name for p in parameters if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keywords = {p.name: None for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
        try:
            inspect.signature(method).bind(*positional, **keywords)
        except TypeError:
            raise ConfigurationError(
                f"{at}: {name}{inspect.signature(method)} cannot be called as {wanted}"
            ) from None
        except ValueError:  # no signature to read (a builtin): trust it
            pass
    for name in attributes:
        if not hasattr(part, name):
            raise ConfigurationError(f"{at}: no attribute {name!r}")


class _Pairs(tuple[tuple[str, Any], ...]):
    """A mapping of a config, frozen: its (key, value) pairs in key order."""

    __slots__ = ()


def frozen(value: Any) -> Any:
    """A config value as a hashable one (lists become tuples, mappings their sorted pairs),
    so a config can be a dict key; :func:`thawed` gives it back."""
    if isinstance(value, list | tuple):
        return tuple(frozen(item) for item in value)
    if isinstance(value, Mapping):
        return _Pairs(sorted((str(key), frozen(item)) for key, item in value.items()))
    return value


def thawed(value: Any) -> Any:
    """The plain value :func:`frozen` froze: lists and dicts again."""
    if isinstance(value, _Pairs):
        return {key: thawed(item) for key, item in value}
    if isinstance(value, tuple):
        return [thawed(item) for item in value]
    return value
