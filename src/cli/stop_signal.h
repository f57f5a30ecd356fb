// SIGTERM and SIGINT as a request to stop at the next step boundary, for `ringd train`: Kubernetes
// sends SIGTERM to a pod it deletes (its agent passes it on to the ranks there), and mpirun
// passes on the one `ringd launch` forwards. The handler only records the signal; the training
// loop looks at it between steps (runners::TrainHooks::stop_requested), so the ranks stop
// together and rank 0 writes a checkpoint. A second SIGINT ends the process at once (Ctrl-C twice);
// further SIGTERMs change nothing, because they come in pairs under mpirun (the agent signals an
// orted's process group, then the orted its ranks) and Open MPI's SIGKILL follows anyway
// (`ringd launch --sigkill-timeout`).
#pragma once

namespace ringd::cli {

// Installs the handlers; once per process, after MPI_Init (which may install handlers of its own).
void install_stop_signal_handlers();

// The first SIGTERM or SIGINT received since the handlers were installed; 0 if none.
int stop_signal_received();

}  // namespace ringd::cli
