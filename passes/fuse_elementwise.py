"""``fuse_elementwise``: group elementwise nodes of one shape into ``fused_elementwise`` nodes.

A step of numpy calls makes one pass over memory per op: relu6's gradient (``gt, where, lt,
where``) reads and writes a batch of activations four times, Adam's update thirteen times per
parameter. Grouped, the executor runs each group as one loop (numba, over both cores) that
reads every input once and writes only what leaves the group.

The grouping is XLA's loop fusion at its simplest: walking the nodes in order, a fusible node
joins the groups of its producers that have its shape, merging them, unless an input of the
merged group would then depend on the group through a node outside it (the fused node would
wait on itself); otherwise it starts a group. Inputs either have the group's shape or one element
(a constant such as Adam's ``beta1``). A group's outputs are its values read outside it, graph
outputs and state updates; values used only inside it never reach memory. The pass runs last
in every pipeline, after autodiff and the optimizer update, so the fused op needs no gradient.
"""
from __future__ import annotations

import heapq

from ..ir.graph import Graph, Node, Value
from ..ir.ops.fused_elementwise import MAX_OUTPUTS, fusible

PASS_META = {"pass": "fuse_elementwise"}


def fuse_elementwise(graph: Graph) -> Graph:
    """A copy of ``graph`` with each group of two or more fusible nodes as one node.

    >>> import numpy as np, graphc as gc
    >>> g = gc.jit.trace(lambda x: (x * 2 + 1).relu(), np.ones((2, 3), np.float32))
    >>> [n.op for n in fuse_elementwise(g).nodes]
    ['fused_elementwise']
    >>> [n.op for n in fuse_elementwise(g).nodes[0].attrs["body"].nodes]
    ['mul', 'add', 'relu']
    """
    groups = [g for g in _find_groups(graph) if len(g) > 1]
    if not groups:
        return graph
    wanted_outside = _values_read_outside(graph, groups)
    fused = {}
    for members in groups:
        node = _fused_node(graph, members, wanted_outside)
        if node is not None:
            fused[members[-1]] = (node, set(members))
    if not fused:
        return graph
    out = graph.copy()
    out.nodes = _in_dependency_order(graph, fused)
    return out


def _find_groups(graph: Graph) -> list[list[int]]:
    """Node indices per group, in graph order. A fusible node merges the groups of all its
    producers that have its shape, as long as the merged group stays acyclic."""
    nodes = graph.nodes
    producer = {id(v): i for i, n in enumerate(nodes) for v in n.outputs}
    group_of: dict[int, int] = {}
    groups: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        if not fusible(node):
            continue
        shape = node.outputs[0].type.shape
        merged = [i]
        for v in node.inputs:
            gid = group_of.get(producer.get(id(v), -1))
            if gid is None or nodes[groups[gid][0]].outputs[0].type.shape != shape:
                continue
            if gid in {group_of.get(m) for m in merged}:
                continue
            trial = merged + groups[gid]
            if not _waits_on_itself(nodes, producer, set(trial), group_of, groups):
                merged = trial
        gid = min((group_of[m] for m in merged if m in group_of), default=i)
        for m in merged:
            old = group_of.get(m)
            if old is not None and old != gid:
                groups.pop(old, None)
            group_of[m] = gid
        groups[gid] = sorted(merged)
    return [groups[g] for g in sorted(groups)]


def _waits_on_itself(nodes: list, producer: dict, members: set, group_of: dict, groups: dict) -> bool:
    """Whether an input of a member depends on a member through something outside the group:
    a backward search from the members' outside inputs. Another group counts as one node (its
    fused node waits for all its members' inputs), so reaching one of its members continues
    from all of them; without that, two groups could each wait on the other."""
    stack = [producer[id(v)] for m in members for v in nodes[m].inputs
             if id(v) in producer and producer[id(v)] not in members]
    seen = set()
    while stack:
        j = stack.pop()
        if j in seen:
            continue
        if j in members:
            return True
        seen.add(j)
        gid = group_of.get(j)
        for k in groups[gid] if gid is not None else (j,):
            seen.add(k)
            stack.extend(producer[id(v)] for v in nodes[k].inputs if id(v) in producer)
    return False


def _values_read_outside(graph: Graph, groups: list) -> set:
    """Ids of values read by a node of another group or ungrouped, or by the graph's caller."""
    group_of = {i: k for k, members in enumerate(groups) for i in members}
    read = {id(v) for v in graph.root_values()}
    producer = {id(v): i for i, n in enumerate(graph.nodes) for v in n.outputs}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            j = producer.get(id(v))
            if j is not None and (i not in group_of or group_of.get(j) != group_of[i]):
                read.add(id(v))
    return read


def _fused_node(graph: Graph, members: list, wanted_outside: set) -> Node | None:
    """The ``fused_elementwise`` node of one group, or None when it would store too many outputs."""
    nodes = [graph.nodes[i] for i in members]
    made = {id(v) for n in nodes for v in n.outputs}
    outer_inputs, outer_outputs, seen = [], [], set()
    for n in nodes:
        for v in n.inputs:  # each outside value once, in first-use order (x * x reads x once)
            if id(v) not in made and id(v) not in seen:
                seen.add(id(v))
                outer_inputs.append(v)
        outer_outputs += [v for v in n.outputs if id(v) in wanted_outside]
    if not outer_outputs or len(outer_outputs) > MAX_OUTPUTS:
        return None
    body = Graph(f"fused_{nodes[-1].outputs[0].name}")
    env = {}  # the body's own values, named as the values they stand for (debugging tools name them)
    for v in outer_inputs:
        env[id(v)] = body.add_input(Value(v.name, v.type))
    for n in nodes:
        outputs = [Value(v.name, v.type) for v in n.outputs]
        body.nodes.append(Node(n.op, [env[id(v)] for v in n.inputs], outputs, dict(n.attrs), dict(n.meta)))
        env.update(zip((id(v) for v in n.outputs), outputs))
    body.outputs = [env[id(v)] for v in outer_outputs]
    body.output_names = [v.name for v in body.outputs]
    meta = {**nodes[0].meta, **PASS_META, "fused": "+".join(n.op for n in nodes)}
    return Node("fused_elementwise", outer_inputs, outer_outputs, {"body": body}, meta)


def _in_dependency_order(graph: Graph, fused: dict) -> list[Node]:
    """The nodes with each group replaced by its fused node, topologically sorted; ties go to
    the original order (a fused node stands where its last member stood)."""
    absorbed = {i for _, members in fused.values() for i in members}
    items = []  # (position, node)
    for i, node in enumerate(graph.nodes):
        if i in fused:
            items.append((i, fused[i][0]))
        elif i not in absorbed:
            items.append((i, node))
    maker = {id(v): k for k, (_, n) in enumerate(items) for v in n.outputs}
    waiting = [0] * len(items)
    users: list[list[int]] = [[] for _ in items]
    for k, (_, node) in enumerate(items):
        for j in {maker[id(v)] for v in node.inputs if id(v) in maker}:
            waiting[k] += 1
            users[j].append(k)
    ready = [(pos, k) for k, (pos, _) in enumerate(items) if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(items[k][1])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (items[u][0], u))
    assert len(order) == len(items), "fuse_elementwise made a cycle"  # the grouping rule rules it out
    return order
