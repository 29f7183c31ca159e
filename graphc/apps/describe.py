"""What `graphc inspect` and the demo print about a plan: its kind, inputs, state, memory,
custom op bodies, schedulers and the numeric verification record."""
from __future__ import annotations

import collections

from ..ir.errors import GraphcError, clip


def _fmt_bytes(n: int) -> str:
    from ..executor.budget import format_bytes

    return format_bytes(n, digits=1)


def describe_plan(plan, path: str = "") -> str:
    """The text ``graphc inspect`` prints."""
    g = plan.graph
    version = ".".join(map(str, plan.format_version)) if plan.format_version else "?"
    lines = [f"file: {path}" if path else None,
             f"kind: {plan.kind}    producer: {plan.producer or '?'}    format: {version}",
             "inputs:  " + ", ".join(f"{v.name} {v.type}" for v in g.inputs[:len(plan.input_names)]),
             "outputs: " + ", ".join(f"{n} {v.type}" for n, v in zip(plan.output_names, g.outputs))]
    if plan.hyper_inputs:
        lines.append("hyper-parameter inputs: " + ", ".join(
            f"{n}={group['lr']:g}" for n, group in zip(plan.hyper_inputs, plan.param_groups)))
    for role, title in (("param", "parameters"), ("buffer", "buffers"), ("optim", "optimizer state")):
        arrays = [plan._state[k] for k, r in g.state_roles.items() if r == role]
        if arrays:
            count = sum(int(a.size) for a in arrays)
            nbytes = sum(int(a.nbytes) for a in arrays)
            lines.append(f"{title}: {len(arrays)} tensors, {count:,} values, {_fmt_bytes(nbytes)}")
    frozen = list(g.constant_data.values())
    if frozen:
        lines.append(f"constants: {len(frozen)} tensors, {sum(int(a.size) for a in frozen):,} values, "
                     f"{_fmt_bytes(sum(int(a.nbytes) for a in frozen))}")
    if plan.kind == "training":
        lines.append(f"training steps so far: {plan.step_count}")
        lines += [f"lr scheduler: {_describe_scheduler(s)}" for s in plan.lr_schedulers]
        if not plan.lr_schedulers and plan.param_groups:
            lines.append("lr scheduler: none saved (the learning rates above stay fixed on resume)")
    for entry in g.meta.get("passes", []):
        lines.append(f"pass {entry['name']}: {entry['nodes_before']} -> {entry['nodes_after']} nodes")
    if isinstance(g.meta.get("verification"), list):  # compiled with verify="numeric"
        lines += describe_verification(g.meta["verification"])
    arenas = []
    for batch in (1, 64):
        try:  # plans the arena without allocating it: a hostile file's sizes are only reported
            report = plan.memory_report(batch=batch)
        except GraphcError as e:  # over the memory budget, or batch norm in training at batch 1
            arenas.append(f"not planned at batch {batch} ({_shorten(e.message)})")
            continue
        arenas.append(f"{_fmt_bytes(report.arena_bytes)} at batch {batch} "
                      f"({_fmt_bytes(report.unplanned_bytes)} without reuse)")
    if arenas:
        lines.append("activation arena: " + "; ".join(arenas))
    histogram = collections.Counter(n.op for n in g.nodes)
    lines.append(f"nodes: {len(g.nodes)}")
    lines += [f"  {op:<26} {count}" for op, count in histogram.most_common()]
    lines += describe_custom_ops(g)
    return "\n".join(line for line in lines if line is not None)


def describe_custom_ops(graph) -> list:
    """One line per custom op body a plan keeps (``passes="none"``: calls not inlined)."""
    calls = collections.Counter(id(n.attrs["forward"]) for n in graph.nodes if n.op == "custom_call")
    bodies = graph.bodies()
    if not bodies:
        return []
    lines = [f"custom op bodies: {len(bodies)} (print the graph or graphc viz to see them)"]
    for body in bodies:
        ops = collections.Counter(n.op for n in body.nodes)
        used = f", called {calls[id(body)]}x" if calls[id(body)] else ""
        lines.append(f"  {_shorten(body.name, 60):<26} {len(body.nodes)} nodes ({', '.join(ops)}){used}")
    return lines


def _number(x) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "?"  # a hand-edited plan file: inspect still prints the rest
    return str(x) if isinstance(x, int) else f"{x:.2g}"


def _field_text(x, width: int = 40) -> str:
    return clip(x, width) if isinstance(x, str) else "?"


def _worst(entry: dict) -> str:
    worst, where = _field_text(entry.get("worst")), _field_text(entry.get("where", ""), 80)
    return (worst or "-") + (f" [{where}]" if worst and where else "")


def describe_verification(entries: list) -> list:
    """The lines ``graphc inspect`` prints for ``graph.meta["verification"]`` (``verify="numeric"``;
    fields that are not what graphc writes print as ``?``).

    >>> print("\\n".join(describe_verification([{"pass": "cse", "dtype": "float64", "batch": 8, "rtol": 1e-9,
    ...     "outputs": 1, "kept": 3, "new": 0, "max_abs": 0.0, "max_rel": 0.0, "worst": "", "note": ""}])))
    numeric verification (verify="numeric", batch 8): every pass within tolerance
      pass                  dtype    outputs   kept   new   max abs   max rel    rtol  worst value
      cse                   float64        1      3     0         0         0   1e-09  -
    """
    if not entries:  # passes="none" on an inference graph: nothing ran, nothing was compared
        return ['numeric verification (verify="numeric"): no passes ran']
    batch = next((e.get("batch") for e in entries if isinstance(e, dict)), None)
    lines = [f"numeric verification (verify=\"numeric\", batch {_number(batch)}): every pass within tolerance",
             f"  {'pass':<20}  {'dtype':<7}  {'outputs':>7}  {'kept':>5}  {'new':>4}  {'max abs':>8}  "
             f"{'max rel':>8}  {'rtol':>6}  worst value"]
    notes = []
    for e in (e for e in entries if isinstance(e, dict)):
        counts = [_number(e.get(k)) for k in ("outputs", "kept", "new", "max_abs", "max_rel", "rtol")]
        lines.append(f"  {_field_text(e.get('pass'), 20):<20}  {_field_text(e.get('dtype'), 7):<7}  {counts[0]:>7}  "
                     f"{counts[1]:>5}  {counts[2]:>4}  {counts[3]:>8}  {counts[4]:>8}  {counts[5]:>6}  {_worst(e)}")
        if e.get("note"):
            notes.append(f"  note: {_field_text(e.get('pass'), 20)}: {_field_text(e.get('note'), 200)}")
    return lines + notes


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _describe_scheduler(scheduler) -> str:
    if isinstance(scheduler, dict):  # loaded without graphc's scheduler table (plain data)
        return f"{scheduler.get('type')} (state saved)"
    return scheduler.describe()
