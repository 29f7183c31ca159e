"""A small pattern matcher for fusions: a rule is a (pattern, rewrite) pair, as in tinygrad's
``PatternMatcher``. A pattern names an op (or several), optionally a condition on the node,
and, for one of its inputs (the first unless said), the pattern of the node producing it; an
inner node matches only where its output has a single user and is not a graph output or
state update (the torch.fx fuser's rule)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir.graph import Graph, Node
from .rewrite import use_counts


@dataclass(frozen=True)
class Pat:
    """Matches a node whose op is in ``ops`` and for which ``when(node, graph)`` holds;
    ``src`` matches the producer of its input ``arg``."""

    ops: tuple
    src: "Pat | None" = None
    arg: int = 0
    when: Callable | None = None

    def match(self, node: Node, producers: dict, counts: dict, graph: Graph) -> list | None:
        """The chain of matched nodes, innermost first, or None."""
        if node.op not in self.ops or (self.when is not None and not self.when(node, graph)):
            return None
        if self.src is None:
            return [node]
        value = node.inputs[self.arg] if len(node.inputs) > self.arg else None
        inner = producers.get(id(value)) if value is not None else None
        if inner is None or counts.get(id(value), 0) != 1:
            return None
        chain = self.src.match(inner, producers, counts, graph)
        return None if chain is None else chain + [node]


def pat(*ops: str, src: Pat | None = None, arg: int = 0, when: Callable | None = None) -> Pat:
    return Pat(tuple(ops), src, arg, when)


Rule = tuple  # (Pat, rewrite(chain: list[Node]) -> Node)


def rewrite(graph: Graph, rules: list[Rule]) -> Graph:
    """Replace each match (tried at every node, last node first, rules in order) by the node its
    rewrite builds; a node takes part in one match at most."""
    counts, producers = use_counts(graph), graph.producers()
    replaced: dict[int, Node] = {}
    removed: set[int] = set()
    for node in reversed(graph.nodes):
        if id(node) in removed or id(node) in replaced:
            continue
        for pattern, build in rules:
            chain = pattern.match(node, producers, counts, graph)
            if chain is None or any(id(n) in removed or id(n) in replaced for n in chain[:-1]):
                continue
            replaced[id(node)] = build(chain)
            removed.update(id(n) for n in chain[:-1])
            break
    out = graph.copy()
    out.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]
    return out


def fused_meta(chain: list, pass_name: str) -> dict:
    """The head node's meta (module path, source line) with the pass and what was fused."""
    return {**chain[0].meta, "pass": pass_name, "fused": "+".join(n.op for n in chain)}
