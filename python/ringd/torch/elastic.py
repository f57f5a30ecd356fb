"""ringd.torch.elastic: Horovod's elastic API on ringd's elastic jobs (docs/elastic.md).

    import ringd.torch as hvd
    hvd.init()   # with RINGD_ELASTIC_RENDEZVOUS=host:port (and _MIN_RANKS, _MAX_RANKS): elastic

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            state.sampler.set_epoch(state.epoch)
            for state.batch, (x, y) in enumerate(loader, start=state.batch):  # see ElasticSampler
                ...
                state.sampler.record_batch(state.batch, batch_size)
                state.commit()
            state.batch = 0

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)
    train(state)

run() calls the function; when a collective fails because a rank was lost (PeerLostError, or
RingdTimeoutError for a cut link) the state goes back to its last commit(), the job re-forms among
the survivors (the same processes: none restarts), the state is synchronised from the new rank 0
(a process holding the newest commit) and the function is called again. commit() also asks, with
the other ranks, whether a process waits to join: if one does, every rank raises
HostsUpdatedInterrupt after that commit, the job re-forms with the newcomer, which receives the
state, and the function is called again. The processes are started by hand, by a launcher or by a
StatefulSet, each with the same environment; there is no horovodrun driver.

Differences from Horovod, chosen: ElasticSampler.set_epoch(e) keeps the samples already processed
when e is the epoch it is in (Horovod's resets them, so a function re-entered mid-epoch after a
reset would read that epoch's first samples again); the step a process gives the rendezvous is its
count of commits, so rank 0 after a reset is a process with the newest commit.
"""

import copy
import functools
import math

import torch

from ringd import _runtime
from ringd._core import PeerLostError, RingdTimeoutError
from ringd.collectives import broadcast_object
from ringd.torch.collectives import allreduce
from ringd.torch.functions import broadcast_optimizer_state, broadcast_parameters

__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler",
           "HostsUpdatedInterrupt"]


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by commit()/check_host_updates() on every rank when a process waits to join: run()
    re-forms the job with it (the state was just committed: nothing is rolled back)."""

    def __init__(self, skip_sync=False):
        super().__init__("a process waits to join the elastic job")
        self.skip_sync = skip_sync


class State:
    """What survives a reset: save() at commit(), restore() after a failure, sync() from rank 0
    after every re-forming."""

    def __init__(self):
        self._reset_callbacks = []
        self._commits = -1  # -1: nothing committed or received yet (a newcomer)

    def register_reset_callbacks(self, callbacks):
        """Functions called (no arguments) after every re-forming, on every rank."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (what a failure rolls back to), then check_host_updates()."""
        self.save()
        self._commits += 1
        self.check_host_updates()

    def check_host_updates(self):
        """Collective: raises HostsUpdatedInterrupt on every rank when a process waits to join."""
        elastic = _runtime.elastic_job()
        if elastic is None:
            return
        waiting = torch.tensor([1.0 if elastic.newcomer_waiting() else 0.0])
        if allreduce(waiting, op=_runtime.Max, name="ringd.elastic.join").item() > 0:
            raise HostsUpdatedInterrupt()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError

    def reset(self):
        pass


class ObjectState(State):
    """Keyword arguments kept as attributes (state.epoch, state.batch, ...): deep copies saved at
    commit, broadcast from rank 0 by sync(). An ElasticSampler among them is saved, restored and
    synchronised through its state_dict()."""

    def __init__(self, **kwargs):
        super().__init__()
        self._names = list(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        self._saved = {}
        self.save()

    def _plain(self):
        return {name: getattr(self, name) for name in self._names
                if not isinstance(getattr(self, name), ElasticSampler)}

    def _samplers(self):
        return {name: getattr(self, name) for name in self._names
                if isinstance(getattr(self, name), ElasticSampler)}

    def save(self):
        self._saved = copy.deepcopy(self._plain())
        self._saved_samplers = {name: copy.deepcopy(s.state_dict())
                                for name, s in self._samplers().items()}

    def restore(self):
        for name, value in copy.deepcopy(self._saved).items():
            setattr(self, name, value)
        for name, sampler in self._samplers().items():
            sampler.load_state_dict(self._saved_samplers[name])

    def sync(self):
        values, samplers, commits = broadcast_object(
            (self._plain(), {n: s.state_dict() for n, s in self._samplers().items()},
             self._commits), root_rank=0, name="ringd.elastic.state")
        for name, value in values.items():
            setattr(self, name, value)
        for name, sampler in self._samplers().items():
            sampler.load_state_dict(samplers[name])
        self._commits = commits
        self.save()

    def reset(self):
        for sampler in self._samplers().values():
            sampler.reset()


class TorchState(ObjectState):
    """A model's and an optimizer's state (either may be None) plus ObjectState's attributes."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        super().__init__(**kwargs)

    def save(self):
        super().save()
        self._saved_model = (copy.deepcopy(self.model.state_dict())
                             if self.model is not None else None)
        self._saved_optimizer = (copy.deepcopy(self.optimizer.state_dict())
                                 if self.optimizer is not None else None)

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0,
                                 prefix="ringd.elastic.model")
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0,
                                      prefix="ringd.elastic.optimizer")
        super().sync()


def _lost_rank(error):
    return isinstance(error, (PeerLostError, RingdTimeoutError))


def run(func):
    """Decorates `func(state, ...)`: see the module's docstring."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if _runtime.elastic_job() is None:
            # Not an elastic job: the function runs once, as Horovod's does without horovodrun.
            return func(state, *args, **kwargs)
        skip_sync = False
        while True:
            try:
                # A loss during the synchronisation itself is recovered from like any other (a
                # broadcast cut short leaves a mix: restore() puts the last commit back).
                if not skip_sync:
                    state.sync()
                result = func(state, *args, **kwargs)
                _runtime.finish_elastic("the training function returned")
                return result
            except HostsUpdatedInterrupt as interrupt:
                skip_sync = interrupt.skip_sync
                reason = "a process waits to join"
            except Exception as error:  # noqa: BLE001: only a lost rank is recovered from
                if not _lost_rank(error):
                    raise
                state.restore()
                skip_sync = False
                reason = f"a rank was lost ({type(error).__name__}: {error})"
            _runtime.reform(reason, state._commits)
            state.on_reset()

    return wrapper


class ElasticSampler(torch.utils.data.Sampler):
    """Each epoch's permutation of `dataset` (from seed + epoch), less the samples already
    processed this epoch, split over the current ranks: after a re-forming the remaining samples
    are spread over the ranks there are now, none skipped or read twice (up to the padding that
    makes the last batch even). Call record_batch(batch_index, batch_size) after each batch and
    keep the sampler in the State (state.sampler) so that it is saved, restored and synchronised.
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples of this epoch processed by all ranks together
        self.reset()

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self.epoch = epoch
            self.processed_num = 0
        self.reset()

    def record_batch(self, batch_index, batch_size):
        """Every rank processed `batch_size` more samples (`batch_index` for Horovod's signature)."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
        self.processed_num = state["processed_num"]
        self.reset()

    def reset(self):
        self.num_replicas = _runtime.size() if _runtime.is_initialized() else 1
        self.rank = _runtime.rank() if _runtime.is_initialized() else 0
        order = list(range(len(self.dataset)))
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = [order[i] for i in torch.randperm(len(order), generator=generator).tolist()]
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
