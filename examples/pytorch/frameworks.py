"""One switch for the examples: the same script runs on ringd.torch, horovod.torch or PyTorch DDP.

    --framework ringd     import ringd.torch as hvd (the default)
    --framework horovod   import horovod.torch as hvd: the same calls, Horovod's engine
    --framework ddp       torch.distributed (gloo) + DistributedDataParallel
    --framework ddp-ringd the same DDP on ringd's torch.distributed backend (import ringd.torch;
                          init_process_group("ringd")): an unmodified DDP script on ringd
    --framework none      plain PyTorch, one process (the baseline a single rank is held to)

Under mpirun the ranks come from Open MPI's variables; under torchrun from RANK/WORLD_SIZE. DDP
needs MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500) to be the same on every rank.
"""
import os

import torch

FRAMEWORKS = ("ringd", "horovod", "ddp", "ddp-ringd", "none")


class Distributed:
    """What an example needs from its framework: rank, size, and the training hooks."""

    def __init__(self, framework):
        if framework not in FRAMEWORKS:
            raise ValueError(f"--framework {framework}: not one of {', '.join(FRAMEWORKS)}")
        self.framework = framework
        self.hvd = None
        self.dist = None
        if framework == "none":
            self.rank, self.size = 0, 1
        elif framework in ("ddp", "ddp-ringd"):
            import torch.distributed as dist

            self.dist = dist
            env = os.environ
            rank = int(env.get("RANK", env.get("OMPI_COMM_WORLD_RANK", "0")))
            size = int(env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE", "1")))
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29500")
            if framework == "ddp-ringd":
                import ringd.torch  # noqa: F401 - registers the backend "ringd"
            dist.init_process_group("gloo" if framework == "ddp" else "ringd", rank=rank,
                                    world_size=size)
            self.rank, self.size = rank, size
        else:
            if framework == "ringd":
                import ringd.torch as hvd
            else:
                import horovod.torch as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()

    def wrap(self, model, optimizer, compression=None, dgc=None):
        """The model and optimizer to train with: replicas start from rank 0's state, and the
        gradients are averaged across the ranks. compression: None, "fp16" or "dgc" (ringd only;
        `dgc` holds Compression.dgc's keyword arguments)."""
        if compression == "dgc" and self.framework != "ringd":
            raise SystemExit(f"--compression dgc: deep gradient compression is ringd's; "
                             f"--framework {self.framework} has none")
        if compression == "fp16" and self.framework in ("ddp", "ddp-ringd", "none"):
            raise SystemExit(f"--fp16-allreduce: not with --framework {self.framework}")
        if self.framework == "none":
            return model, optimizer
        if self.hvd is None:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model)  # broadcasts rank 0's parameters
            return model, optimizer
        hvd = self.hvd
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        kwargs = {}
        if compression == "fp16":
            kwargs["compression"] = hvd.Compression.fp16
        elif compression == "dgc":
            kwargs["compression"] = hvd.Compression.dgc(**(dgc or {}))
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(), **kwargs)
        return model, optimizer

    def set_epoch(self, epoch):
        """Tells ringd the epoch (from 0) for DGC's sparsity warm-up; the others need nothing."""
        if self.framework == "ringd":
            self.hvd.set_epoch(epoch)

    def sum(self, values):
        """The element-wise sum of a float64 tensor over the ranks."""
        if self.framework == "none":
            return values
        if self.hvd is None:
            values = values.clone()
            self.dist.all_reduce(values)
            return values
        return self.hvd.allreduce(values, op=self.hvd.Sum, name="example.sum")

    def shutdown(self):
        if self.hvd is not None:
            self.hvd.shutdown()
        elif self.dist is not None:
            self.dist.destroy_process_group()
