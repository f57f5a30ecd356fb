"""DistributedOptimizer: any torch optimizer, with each gradient averaged over the ranks.

  optimizer = ringd.torch.DistributedOptimizer(optimizer, model.named_parameters())

A post-accumulate-grad hook on every parameter that requires grad hands the gradient to the
fusion engine (allreduce in place, zero-copy) the moment autograd has finished accumulating it,
so communication overlaps the rest of the backward pass; step() waits for all of them and then
runs the wrapped optimizer's step. The returned object is an instance of a class derived from the
optimizer's own (isinstance still holds), sharing its state and param_groups.

backward_passes_per_step=N: gradients accumulate locally for N backward passes and are reduced
after the N-th (scale the loss yourself, as in Horovod). gradient_predivide_factor=f (op
Average): each gradient is divided by f before the sum and multiplied by f/size after.

compression=Compression.dgc(...): deep gradient compression. The momentum moves from the
optimizer into the compressor (momentum correction): the wrapped SGD's momentum becomes the
compressor's and the optimizer's param_groups get momentum 0, so step() applies the averaged
sparse velocities as plain SGD (weight decay, if any, is added there, outside the momentum).
Constructing the optimizer is then collective (the ranks check that their settings agree).
Nesterov momentum, dampening and parameter groups with different momenta are refused. The
compressor's velocities and residuals live in the engine, not in the optimizer's state_dict().
Call ringd.torch.set_epoch(epoch) at each epoch's start for the sparsity warm-up.
"""

import contextlib
import warnings

import torch

from ringd import _runtime
from ringd._runtime import Average, Sum, check_op
from ringd.torch import _submit, dgc
from ringd.torch.compression import Compression, dgc_compressor, wire_and_python_compressor


class _DistributedOptimizer:
    """The methods the derived class adds; see DistributedOptimizer()."""

    def _ringd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                     gradient_predivide_factor):
        check_op(op)
        if backward_passes_per_step < 1:
            raise ValueError(f"ringd: backward_passes_per_step={backward_passes_per_step} must be "
                             ">= 1")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("ringd: gradient_predivide_factor needs op=Average")
        wanted_dgc = dgc_compressor(compression)
        if wanted_dgc is not None:
            compression = self._dgc_with_momentum(wanted_dgc)
            dgc.configure(compression)
            for group in self.param_groups:  # the momentum now lives in the compressor
                if "momentum" in group:
                    group["momentum"] = 0.0
        self._compression = compression
        # Configured again before each staged submission: a new job (ringd.init after shutdown)
        # must receive the settings too; the same job's later calls cost nothing.
        self._dgc = dgc_compressor(compression)
        wire, python_compressor = wire_and_python_compressor(compression)
        self._wire = wire
        # The cheap path (_submit.allreduce_in_place) when nothing happens in Python around the
        # engine: no Python-side compressor, no DGC settings to check, no predivide.
        self._direct = (python_compressor is None and wire != "dgc"
                        and gradient_predivide_factor == 1.0)
        self._backward_passes_per_step = backward_passes_per_step
        self._op = op
        self._predivide = gradient_predivide_factor
        self._names = self._parameter_names(named_parameters)
        self._requires_update = [p for group in self.param_groups for p in group["params"]
                                 if p.requires_grad]
        self._handles = {}  # parameter -> ringd.torch handle of its gradient's allreduce
        self._delay = {p: backward_passes_per_step for p in self._requires_update}
        self._synchronized = False
        self._should_synchronize = True
        self._hook_handles = [p.register_post_accumulate_grad_hook(self._on_gradient)
                              for p in self._requires_update]

    def _dgc_with_momentum(self, compression):
        """Deep gradient compression keeps the momentum (momentum correction): the compressor
        with the optimizer's momentum (which the caller then sets to 0)."""
        groups = self.param_groups
        if any(group.get("nesterov", False) for group in groups):
            raise ValueError("ringd: Compression.dgc with nesterov=True: DGC's momentum correction "
                             "is plain momentum; use nesterov=False")
        momenta = {float(group.get("momentum", 0.0)) for group in groups}
        if len(momenta) > 1:
            raise ValueError(f"ringd: Compression.dgc: the optimizer's parameter groups have "
                             f"different momenta {sorted(momenta)}; DGC keeps one momentum for "
                             "every gradient")
        momentum = momenta.pop()
        if momentum and any(group.get("dampening", 0.0) for group in groups):
            raise ValueError("ringd: Compression.dgc with dampening: DGC's momentum correction "
                             "has none; use dampening=0")
        if compression.momentum is None:
            compression = compression.with_momentum(momentum)
        elif momentum:
            raise ValueError(f"ringd: momentum given twice: Compression.dgc(momentum="
                             f"{compression.momentum}) and the optimizer's momentum={momentum}; "
                             "with DGC the momentum lives in the compressor: set the optimizer's "
                             "to 0 or leave the compressor's out")
        return compression

    def _parameter_names(self, named_parameters):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return {p: f"param.{index}" for index, p in enumerate(params)}
        named = list(named_parameters)
        if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
            raise ValueError("ringd: named_parameters must be (name, parameter) pairs, such as "
                             "model.named_parameters()")
        names = {}
        for name, p in named:
            if p in names and names[p] != name:
                continue  # a shared parameter: its first name
            names[p] = name
        if len(set(names.values())) != len(names):
            raise ValueError("ringd: named_parameters has a name twice")
        missing = [index for index, p in enumerate(params) if p not in names]
        if missing:
            raise ValueError(f"ringd: named_parameters lacks {len(missing)} of the optimizer's "
                             "parameters; pass every parameter it updates (model.named_parameters())")
        return names

    def _submit_gradient(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grad = p.grad
        if self._direct and _submit.takes_in_place(grad):
            self._handles[p] = _submit.allreduce_in_place(grad, self._names[p], self._op,
                                                          self._wire)
            return
        op, prescale, postscale = self._op, 1.0, 1.0
        if self._predivide != 1.0:
            op, prescale, postscale = Sum, 1.0 / self._predivide, self._predivide / _runtime.size()
        if self._dgc is not None:
            dgc.configure(self._dgc)
        self._handles[p] = _submit.allreduce(
            [grad], self._names[p], op, None, prescale, postscale, self._compression,
            in_place=True, grouped=False)

    def _on_gradient(self, p):
        if p in self._handles:
            raise RuntimeError(
                f"ringd: the gradient of '{self._names[p]}' was computed again before step() "
                f"while its allreduce was in flight (more than backward_passes_per_step="
                f"{self._backward_passes_per_step} backward passes per step); raise "
                "backward_passes_per_step to accumulate gradients locally")
        self._delay[p] -= 1
        if self._delay[p] == 0:
            self._submit_gradient(p)

    def synchronize(self):
        """Reduces the gradients not yet submitted (their hooks have not fired: unused
        parameters get a zero gradient, as in Horovod) and waits for all of them."""
        for p in self._requires_update:
            if p not in self._handles:
                self._submit_gradient(p)
        try:
            for p, handle in list(self._handles.items()):
                _submit.wait(handle)
                del self._handles[p]
        except KeyboardInterrupt:
            raise
        except BaseException:
            # The job failed them all; nothing is left in flight, and the next step (an elastic
            # job's, after it re-formed) starts counting backward passes afresh.
            self._handles.clear()
            for p in self._requires_update:
                self._delay[p] = self._backward_passes_per_step
            raise
        for p in self._requires_update:
            self._delay[p] = self._backward_passes_per_step
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside does not synchronize (call synchronize() yourself first, e.g. to clip
        the reduced gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("ringd: optimizer.step() after optimizer.synchronize() without the "
                              "optimizer.skip_synchronize() context reduces the gradients again "
                              "(zero ones, or a second time); wrap step() in skip_synchronize()",
                              stacklevel=2)
            self.synchronize()
        self._synchronized = False
        return self._ringd_base.step(self, closure)

    def zero_grad(self, set_to_none=True):
        if self._handles:
            warnings.warn("ringd: optimizer.zero_grad() while gradient allreduces are in flight "
                          "(after backward(), before step() or synchronize()); waiting for them "
                          "first, and discarding their result", stacklevel=2)
            handles, self._handles = self._handles, {}
            for handle in handles.values():
                _submit.wait(handle)
            for p in self._requires_update:
                self._delay[p] = self._backward_passes_per_step
        return self._ringd_base.zero_grad(self, set_to_none)

    def remove_hooks(self):
        """Detaches the gradient hooks (the optimizer then no longer reduces anything)."""
        for hook in self._hook_handles:
            hook.remove()
        self._hook_handles = []


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    """Wraps `optimizer` (any torch.optim.Optimizer) so that step() uses gradients reduced with
    `op` over every rank. num_groups/groups/sparse_as_dense are accepted for Horovod's signature:
    the fusion engine groups tensors itself, and sparse gradients are not supported."""
    if groups is not None or num_groups:
        warnings.warn("ringd: num_groups/groups are ignored; the fusion engine fuses gradients "
                      "itself (RINGD_FUSION_THRESHOLD_BYTES)", stacklevel=2)
    base = optimizer.__class__
    cls = type(base.__name__, (base,), {
        **{key: value for key, value in _DistributedOptimizer.__dict__.items()
           if not key.startswith("__")},
        "_ringd_base": base,
        "__module__": __name__,
        "__doc__": f"{base.__name__} with gradients reduced over the ranks by ringd.",
    })
    distributed = cls.__new__(cls)
    distributed.__dict__.update(optimizer.__dict__)
    distributed._ringd_setup(named_parameters, compression, backward_passes_per_step, op,
                             gradient_predivide_factor)
    return distributed
