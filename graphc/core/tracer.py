"""Tracing: run a model once on symbolic Tensors and record every op into an ir.Graph.

Each node's meta gets the module path and class of the innermost module being called and
a source line: for graphc's own modules (Linear, Conv2d, ...) the line that constructed
the module; otherwise the innermost stack frame outside the graphc package.
"""
from __future__ import annotations

import contextlib
import inspect
import threading

import numpy as np

from .grad_mode import is_grad_enabled
from .source import user_source
from ..ir.builder import Builder
from ..ir.errors import GraphcError, TraceError
from ..ir.graph import Graph, Value, describe_location
from ..ir.types import BATCH, DType, TensorType, bind_dim, dim_symbols

# The trace that owns traced actions on this thread (JAX's current trace): an op or an in-place
# write on a model's parameter or buffer is recorded on it even when no argument is symbolic
# (``p.data.add_(-lr * p.grad)``, ``l2 = sum(p.pow(2).sum() for p in model.parameters())``).
_active = threading.local()

# ops whose output may share storage with their first input in PyTorch (views): an in-place
# change of either would have to change the other, which a rebound graph value cannot do
VIEW_OPS = frozenset({"reshape", "flatten", "permute", "slice", "broadcast_to", "stop_gradient"})


class Undecided(BaseException):
    """A traced boolean was asked for its Python value past the decisions this trace was given:
    the tracing driver (graphc/branching.py) traces again with the decision forced each way.
    A BaseException, so that a user's ``except Exception`` does not swallow it."""

    def __init__(self, position: int, asked: list):
        super().__init__(position)
        self.position, self.asked = position, asked  # asked: the node meta of every decision so far


def current_tracer():
    """The innermost trace running on this thread, or None."""
    stack = getattr(_active, "stack", None)
    return stack[-1] if stack else None


def note_gradient_reset(param) -> None:
    """Inside a compiled function, ``param.grad = None`` or zeroing it means the plan's gradient
    replaces the caller's ``.grad`` instead of adding to it (graphc/core/step_trace.py)."""
    tracer = current_tracer()
    if tracer is not None:
        tracer.grads_reset.add(id(param))


class EagerTrace:
    """The bottom of the trace stack: actions run now. A traced action goes to the trace in
    hand (a tensor's own, or the current one), which does it its way: no caller tests for a
    tracer (JAX's ``bind``)."""

    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        from .tape import backward

        backward(tensor, gradient, retain_graph, create_graph, inputs)

    def optimizer_step(self, optimizer) -> None:
        optimizer.eager_update().step()

    def scheduler_step(self, scheduler, *args, **kwargs) -> None:
        scheduler.advance(*args, **kwargs)


EAGER = EagerTrace()


def current_trace():
    """The trace that handles an action now: the innermost running trace, else :data:`EAGER`."""
    return current_tracer() or EAGER


@contextlib.contextmanager
def active(tracer):
    """Make ``tracer`` the current trace for the duration of a ``with`` block."""
    stack = _active.__dict__.setdefault("stack", [])
    stack.append(tracer)
    try:
        yield tracer
    finally:
        stack.pop()


def is_builtin_module(module) -> bool:
    return type(module).__module__.startswith("graphc.")


class Tracer:
    """Owns the graph being built and the map from eager tensors to graph values."""

    def __init__(self, name: str, root=None):
        self.graph = Graph(name)
        self.builder = Builder(self.graph)
        self.values: dict[int, Value] = {}  # id(eager Tensor) -> constant Value
        self.state_by_array: dict[int, str] = {}  # id(state array) -> state name: p, p.data, views by .data
        self.current_state: dict[str, Value] = {}  # state name -> its value now (after in-place writes)
        self.updated_params: dict[int, tuple] = {}  # id(value written to a param) -> (name, where)
        self.aliased: set = set()  # ids of values made by, or read by, a view op (VIEW_OPS)
        self.state_values: dict[int, str] = {}  # id(a state's value, first or written) -> state name
        self.state_views: dict[int, tuple] = {}  # id(view of a state's value) -> (name, the value it views)
        self.arguments: set = set()  # ids of the traced function's inputs (the caller's arrays)
        self.keep_alive: list = []  # lifted tensors stay referenced so their ids stay unique
        self.state_arrays: dict[str, np.ndarray] = {}
        self.state_tensors: dict = {}  # state name -> the eager Parameter or buffer it stands for
        self.no_grad_values: set = set()  # ids of values recorded inside gc.no_grad()
        self._stopped: dict = {}  # id(value) -> its stop_gradient, made when grad mode reads it
        self.optimizers: list = []  # the optimizers whose step() the trace ran, in order
        self.grads_reset: set = set()  # ids of parameters whose .grad the step set to None or zeroed
        self.scope: list = []
        self.batch_size = None
        self.sizes: dict = {}  # example size of each declared symbolic dim other than N
        self.examples: dict = {}  # input name -> its value, for inputs given as Python numbers
        self.decisions: list | None = None  # forced answers to traced booleans (None: refuse them)
        self.asked: list = []  # (predicate Value, node meta) per traced boolean asked, in order
        self.also_differentiate: frozenset = frozenset()  # params the other side of a branch differentiates
        self.module_names = {id(m): name for name, m in root.named_modules()} if root is not None else {}
        self.root_type = type(root).__name__ if root is not None else None
        if root is not None:
            self._add_state(root)

    def _add_state(self, root):
        buffers = dict(root.named_buffers())
        for name, tensor in root.state_dict_tensors().items():
            role = "buffer" if name in buffers else "param"
            value = Value(name, TensorType(tensor.array.shape, DType.from_any(tensor.array.dtype)))
            self.graph.add_state(value, role)
            self.builder.reserve(name)
            self.state_by_array[id(tensor.array)] = name
            self.current_state[name] = value
            self.state_values[id(value)] = name
            self.state_arrays[name] = tensor.array
            self.state_tensors[name] = tensor

    # ---- inputs and outputs -------------------------------------------------------
    def add_input(self, name: str, array: np.ndarray, batch: bool, symbols: dict | None = None):
        """A graph input for ``array``: its leading dim the batch symbol ``N`` if ``batch``, and
        ``symbols`` (``{dim: symbol}``, dims a user declared dynamic) symbolic too."""
        from .tensor import Tensor

        shape = tuple(array.shape)
        if batch:
            shape = (BATCH,) + shape[1:]
        for dim, symbol in (symbols or {}).items():
            shape = shape[:dim] + (symbol,) + shape[dim + 1:]
        value = self.graph.add_input(Value(self.graph.unique_name(name), TensorType(shape, DType.from_any(array.dtype))))
        self.builder.reserve(value.name)
        self.arguments.add(id(value))
        return Tensor(_value=value, _tracer=self)

    def example_shape(self, ttype: TensorType) -> tuple:
        from .symint import SymInt

        sizes = {BATCH: self.batch_size, **self.sizes}
        return tuple(d if isinstance(d, int) else SymInt(bind_dim(d, sizes), d, self) for d in ttype.shape)

    def fix_size(self, dim) -> None:
        """A symbolic dim was used as a plain number: the graph holds only at its symbols'
        example sizes (the batch's as ``fixed_batch``, others' in ``fixed_dims``)."""
        for name in dim_symbols(dim):
            if name == BATCH:
                self.fix_batch()
            else:
                fixed = self.graph.meta.setdefault("fixed_dims", {})
                fixed.setdefault(name, {"size": int(self.sizes[name]), "where": self.user_location() or "?"})

    def fix_batch(self) -> None:
        """The batch size was used as a plain number: the graph holds only at this size."""
        if "fixed_batch" not in self.graph.meta:
            self.graph.meta["fixed_batch"] = {"size": int(self.batch_size), "where": self.user_location() or "?"}

    # ---- recording ----------------------------------------------------------------
    def lift(self, x, dtypes) -> Value:
        """The graph Value for a Tensor or Python scalar used as an op input."""
        from .scalars import scalar_array, weak_dtype
        from .tensor import Tensor

        if isinstance(x, Tensor):
            name = self.state_name(x)
            if name is not None:  # a parameter or buffer, as the step's in-place writes left it
                return self.current_state[name]
            if x._tracer is self:
                self._check_fresh(x._value)
                return x._value
            if x._tracer is not None:
                raise TraceError("a tensor from another trace was used here", self.user_location())
            value = self.values.get(id(x))
            if value is None:
                if self.root_type is not None and getattr(x, "requires_grad", False):
                    raise TraceError(f"a Parameter of shape {tuple(x.array.shape)} that is not part of the traced "
                                     f"{self.root_type} is used here; register it on the model (an nn.Module "
                                     "attribute or register_parameter) so it is saved and trained",
                                     self.user_location())
                value = self.builder.constant(x.numpy(), DType.from_any(x.array.dtype))
                self.values[id(x)] = value
                self.keep_alive.append(x)
            return value
        if hasattr(x, "weak_for"):  # a traced Python number (.item() in the trace): its graph value
            from .traced_scalars import TracedFloat

            value = self.lift(x.tensor, [])
            dtype = weak_dtype(1.0 if isinstance(x, TracedFloat) else 1, dtypes)
            return value if value.type.dtype is dtype else self.builder.emit1("cast", [value], {"dtype": dtype.name},
                                                                              self.current_meta())
        if isinstance(x, (bool, int, float, complex, np.number)):
            dtype = weak_dtype(x, dtypes)
            return self.builder.constant(scalar_array(x, dtype), dtype)
        if isinstance(x, np.ndarray):  # a captured array: a constant, typed as eager dispatch types it
            dtype = weak_dtype(x, dtypes)
            return self.builder.constant(np.asarray(x, dtype.numpy), dtype)
        raise TraceError(f"cannot use a {type(x).__name__} as a tensor in a traced op", self.user_location())

    def record(self, op: str, args: list, attrs: dict):
        from .tensor import Tensor

        dtypes = [a.dtype for a in args if isinstance(a, Tensor)]
        inputs = [self.lift(a, dtypes) for a in args]
        meta = self.current_meta()
        grad_mode = is_grad_enabled()
        if grad_mode and self.no_grad_values:  # a no_grad() value read with gradients on passes none back
            inputs = [self._stop_gradient(v, meta) if id(v) in self.no_grad_values else v for v in inputs]
        try:
            outputs = self.builder.emit(op, inputs, attrs, meta)
        except GraphcError as e:
            raise e.located(describe_location(meta)) from None
        if not grad_mode:
            self.no_grad_values.update(id(v) for v in outputs)
        if op in VIEW_OPS:
            self.aliased.update([id(inputs[0]), *(id(v) for v in outputs)])
            base = self._viewed_state(inputs[0])
            if base is not None:
                self.state_views.update((id(v), base) for v in outputs)
        tensors = tuple(Tensor(_value=v, _tracer=self) for v in outputs)
        return tensors[0] if len(tensors) == 1 else tensors

    def draw(self, dims: list, distribution: str, dtype: DType):
        """A ``random`` node: fresh samples from the plan's generator at every run."""
        return self.record("random", [], {"shape": dims, "distribution": distribution, "dtype": dtype.name})

    def _stop_gradient(self, value: Value, meta: dict) -> Value:
        if id(value) not in self._stopped:
            self._stopped[id(value)] = self.builder.emit1("stop_gradient", [value], meta=meta)
        return self._stopped[id(value)]

    def symbolic(self, tensor):
        """The symbolic stand-in for an eager state tensor read inside a traced module."""
        from .tensor import Tensor

        stand_in = Tensor(_value=self.lift(tensor, []), _tracer=self)
        stand_in._origin = tensor  # its .grad is the parameter's own
        stand_in.requires_grad = tensor.requires_grad
        return stand_in

    def guard(self, inputs) -> None:
        """The plan holds only at these inputs' example values (a Python number used as a shape
        or a count): ``graph.meta["guards"]``, checked at every call (graphc/executor/plan.py)."""
        guards = self.graph.meta.setdefault("guards", {})
        for name in inputs:
            guards.setdefault(name, {"value": self.examples[name], "where": self.user_location() or "?"})

    def decide(self, tensor, what: str) -> bool:
        """The Python value of a traced boolean (``if t:``): the forced decision at this point of
        the trace, or :class:`Undecided` so that both sides are traced (graphc/branching.py)."""
        if self.decisions is None:
            raise TraceError(f"{what} needs a concrete value, but this tensor is being traced; use gc.cond or "
                             "gc.where, or keep the decision outside the compiled function", self.user_location())
        value = self.lift(tensor, [])
        if any(d != 1 for d in value.type.shape):
            raise TraceError(f"{what}: a tensor with {value.type} is not one boolean (PyTorch: 'Boolean value of Tensor "
                             "with more than one value is ambiguous')", self.user_location())
        position = len(self.asked)
        self.asked.append((value, self.current_meta()))
        if position < len(self.decisions):
            return self.decisions[position]
        raise Undecided(position, [meta for _, meta in self.asked])

    # ---- actions: backward() and optimizer.step() inside the traced function -----------
    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        from .step_trace import traced_backward

        traced_backward(tensor, gradient, retain_graph, create_graph, inputs)

    def optimizer_step(self, optimizer) -> None:
        from .step_trace import traced_step

        traced_step(optimizer, self)

    def scheduler_step(self, scheduler, *args, **kwargs) -> None:
        raise TraceError(f"{type(scheduler).__name__}.step() inside a compiled function would change the learning "
                         "rate once, while tracing, and never in the plan: call it outside the compiled step (the "
                         "plan reads each group's learning rate at every call)", self.user_location())

    # ---- state: parameters and buffers ------------------------------------------------
    def state_name(self, tensor) -> str | None:
        """The parameter or buffer ``tensor`` is in this trace: the eager tensor itself or any
        tensor sharing its array (``p.data``), or a traced stand-in for one; else None."""
        if tensor._tracer is None:
            return self.state_by_array.get(id(tensor.array)) if tensor.array is not None else None
        if tensor._tracer is self and tensor._origin is not None:
            return self.state_name(tensor._origin)
        return None

    def assign(self, target, new) -> None:
        """Record ``target <- new`` for a buffer (running stats): a graph update."""
        name = self.state_name(target)
        if name is None:
            raise TraceError("only registered buffers can be updated inside a traced model", self.user_location())
        self.write_state(name, self.lift(new, [self.graph.state[name].type.dtype]))

    def _viewed_state(self, value: Value):
        """(state name, state value) when ``value`` is a state's value or a view of one."""
        name = self.state_values.get(id(value))
        return (name, value) if name is not None else self.state_views.get(id(value))

    def _check_fresh(self, value: Value) -> None:
        """A view of a parameter or buffer taken before an in-place update of it would, in
        PyTorch, show the new values; the graph's view holds the old ones: refuse reading it."""
        view = self.state_views.get(id(value))
        if view is not None and self.current_state[view[0]] is not view[1]:
            raise TraceError(f"this reads a view of {view[0]} (a reshape, slice or transpose of it) taken before its "
                             "in-place update in the same compiled step, which would still show the old values; take "
                             "the view again after the update", self.user_location())

    def write_state(self, name: str, new: Value) -> None:
        """``name <- new`` at this point of the step: the plan's update of that state, and what
        later reads in the trace see. The new value carries no gradient (PyTorch allows such
        writes to a parameter only under no_grad or through ``.data``)."""
        old = self.graph.state[name]
        if new.type != old.type:
            raise TraceError(f"in-place update of {name} makes a {new.type} value; {name} is {old.type}",
                             self.user_location())
        self.graph.updates[name] = new
        self.current_state[name] = new
        self.state_values.setdefault(id(new), name)  # (``b.copy_(a)`` may make a's value b's too)
        self.no_grad_values.add(id(new))
        if self.graph.state_roles[name] == "param":
            self.updated_params[id(new)] = (name, self.user_location())

    def current_meta(self) -> dict:
        meta = {}
        module = self.scope[-1] if self.scope else None
        if module is not None:
            path = self.module_names.get(id(module), "")
            if path:
                meta["module"] = path
            meta["module_type"] = type(module).__name__  # kept for the root module too
        source = getattr(module, "_gc_source", None) if module is not None and is_builtin_module(module) else None
        source = source or user_source()
        if source:
            meta["source"] = source
        return meta

    def user_location(self) -> str | None:
        return describe_location(self.current_meta())


def input_names(fn, count: int) -> list:
    """Names for graph inputs from the forward signature (``x``, ``y``) or ``input{i}``."""
    target = getattr(fn, "forward", fn)
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    names += [f"input{i}" for i in range(len(names), count)]
    return names
