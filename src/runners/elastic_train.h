// `ringd train --elastic` (issue 39): the MLP trained by a job whose ranks may come and go. Each
// generation (job/elastic_job.h) starts by taking the state, the step and the count of applied
// updates from its rank 0 (a process holding the newest step), then trains through an engine of
// its own until all steps are done, a rank is lost, or a process waits to join:
//
//   lost     a step fails with kPeerLost (a process died: its sockets closed) or kTimeout (a cut
//            link): the survivors shut their engine down, end the generation and form the next
//            among themselves, no process restarting, no checkpoint read. A failed step changes
//            nothing (AllreduceSync applies no update until every gradient arrived), so each
//            survivor's live state is a committed one; ranks that were one step apart agree on
//            the newest through the next generation's rank 0.
//   joins    every --elastic-check-every steps the ranks vote (through the engine, with the
//            step's gradients) on whether a process waits in the next generation; if one does,
//            all end theirs after that step and form the next one with it, and it receives the
//            parameters and the momentum from rank 0.
//
// The data and the optimizer do not depend on how many ranks there are: the global batch is
// --batch-size x --max-ranks, split evenly over the generation's ranks (every rank count from
// --min-ranks to --max-ranks must divide it), and the learning rate is scaled for --max-ranks; so a
// lost rank's share of each step is read by the others, none skipped or read twice.
//
// Not yet elastic: checkpoints and --resume, local devices and --gpus, DGC, the parameter-server
// mode, the replay model (refused with a clear error).
#pragma once

#include "job/elastic_job.h"
#include "runners/train_config.h"
#include "runners/train_runner.h"

namespace ringd::runners {

// Throws kInvalidArgument for what an elastic run cannot do (see above).
void check_elastic_config(const TrainConfig& config, const rendezvous::ElasticBounds& bounds);

// Runs this process's part of the elastic job until every step is done; the summary of the last
// generation's rank 0 is the one to print (TrainSummary::generations, steps_applied; ranks: the
// last generation's). Every process needs the test set (any of them may end as rank 0). Errors
// other than a lost rank (and a generation that cannot form in time) are rethrown.
TrainSummary run_elastic_train(job::ElasticJob& job, const TrainConfig& config,
                               const TrainData& data, const TrainHooks& hooks = {});

}  // namespace ringd::runners
