"""YAML with line numbers: compose safely and keep the line of every value and key (pure).

Refuses duplicate keys, anchors and aliases, non-standard tags and nesting deeper than
``limits.MAX_YAML_DEPTH``; every problem is a ``ScenarioError`` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml

from distviz.errors import ScenarioError
from distviz.limits import MAX_YAML_DEPTH
from distviz.scenario.error_text import kind

__all__ = ["Y", "YamlReader"]


@dataclass
class Y:
    """A YAML value with the line (1-based) where it starts; mappings keep their key lines."""

    value: Any
    line: int
    style: str | None = None
    key_lines: dict[str, int] = field(default_factory=dict)


class YamlReader:
    """Compose YAML safely and convert it to ``Y`` values, keeping lines, refusing duplicate
    keys, aliases and non-standard tags."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: set[int] = set()
        self.constructor = yaml.SafeLoader("")

    def error(self, line: int | None, message: str, key: str | None = None) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=line, key=key)

    def read(self, text: str) -> Y | None:
        try:
            depth = 0
            for event in yaml.parse(text, Loader=yaml.SafeLoader):
                mark = event.start_mark
                line = mark.line + 1 if mark is not None else None
                if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                    self.error(line, "YAML anchors and aliases (&name, *name) are not "
                                     "supported in scenarios")
                if isinstance(event, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_YAML_DEPTH:
                        self.error(line, f"the YAML is nested more than {MAX_YAML_DEPTH} "
                                         "levels deep")
                elif isinstance(event, yaml.CollectionEndEvent):
                    depth -= 1
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or "cannot parse"
            context = f" {exc.context}" if exc.context else ""
            hint = "; check the indentation" if "block" in problem + context else ""
            self.error(line, f"invalid YAML: {problem}{context}{hint}")
        except yaml.YAMLError as exc:
            self.error(None, f"invalid YAML: {' '.join(str(exc).split())}")
        if node is None:
            return None
        return self.convert(node)

    def convert(self, node: yaml.Node) -> Y:
        line = node.start_mark.line + 1
        if node.tag not in _SAFE_TAGS:
            self.error(line, f"unsupported YAML tag {node.tag!r}")
        if id(node) in self.seen:
            self.error(line, "YAML anchors and aliases (*name) are not supported in scenarios")
        self.seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Y] = {}
            key_lines: dict[str, int] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    self.error(key_line, "keys must be plain strings")
                key = self.scalar(key_node)
                if isinstance(key, bool):
                    self.error(key_line, f"keys must be strings, found {key!r}: YAML reads "
                                         "yes/no/on/off/true/false as true/false; quote the key")
                if not isinstance(key, str):
                    self.error(key_line, f"keys must be strings, found {key!r} ({kind(key)})")
                if key in out:
                    self.error(key_line, f"duplicate key '{key}' (first at line {key_lines[key]})",
                               key=key)
                key_lines[key] = key_line
                out[key] = self.convert(value_node)
            return Y(out, line, key_lines=key_lines)
        if isinstance(node, yaml.SequenceNode):
            return Y([self.convert(item) for item in node.value], line)
        if isinstance(node, yaml.ScalarNode):
            return Y(self.scalar(node), line, style=node.style)
        self.error(line, "unsupported YAML node")  # pragma: no cover

    def scalar(self, node: yaml.Node) -> Any:
        if node.tag not in _SAFE_TAGS:
            self.error(node.start_mark.line + 1, f"unsupported YAML tag {node.tag!r}")
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            self.error(node.start_mark.line + 1, f"invalid YAML value: {problem}")
        except ValueError as exc:
            self.error(node.start_mark.line + 1, f"invalid YAML value: {exc}")


_SAFE_TAGS = frozenset({
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
})
