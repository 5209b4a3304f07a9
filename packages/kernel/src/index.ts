/**
 * @skein/kernel: the actor machinery under every session, task and worker.
 */
