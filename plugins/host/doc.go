// Package host runs transcription backends for the daemon: it discovers
// backend executables, starts each as a go-plugin subprocess under a
// placement lease with the lease's environment, keeps loaded backends warm,
// health-checks and restarts them, and gives their leases back.
//
// # Discovery
//
// A backend is an executable named wsched-backend-NAME in [backends]
// plugin_dir or one of [backends] dev_dirs (searched in that order; the
// first file for a NAME wins). A file that is group- or world-writable, not
// executable, or owned by anyone but root or the daemon's user is refused,
// as is a directory that is group- or world-writable or foreign-owned; each
// refusal is logged once, naming the file and the reason. Scan does the
// check without running anything; Host.Status also runs each accepted
// binary once (go-plugin handshake with AutoMTLS, then Info, with
// CUDA_VISIBLE_DEVICES="" so the probe touches no GPU) and caches the answer
// until the file changes. Check does the same for one path, for
// `wsched backends check`.
//
// # Using a backend
//
// Acquire(ctx, Spec) returns an *Instance: a backend process with Spec's
// model loaded, checked out to the caller (alone, or as one of up to
// Spec.MaxStreams callers), and a release function.
//
//	inst, release, err := h.Acquire(ctx, host.Spec{
//		Backend: "whisper", Load: plugins.LoadRequest{ModelPath: model},
//		MemoryBytes: estimate, Device: dev, Priority: placement.Normal,
//	})
//	if err != nil { … }
//	defer release()
//	mem := inst.Memory()                     // the backend's own report, for the estimator
//	res, err := inst.Transcribe(ctx, req, emit)
//
// The instance runs under its own lease of Spec.MemoryBytes, held by the
// daemon (Options.Holder) and renewed by the host. The backend process gets
// the lease's environment (placement.Env: CUDA_VISIBLE_DEVICES=<GPU UUID>,
// CUDA_DEVICE_ORDER, SENSEVOICE_DEVICE=cuda:0, WSCHED_LEASE_ID, …), so it
// sees exactly its GPU as cuda:0, and its PID is registered with the lease
// (AddPID) so reconciliation counts its GPU memory against it. Its log lines
// reach the daemon's log tagged backend=NAME lease=ID.
//
// An instance serves one caller at a time unless its spec allows several
// streams (Spec.MaxStreams > 1, [[models.model]] max_streams; streams.go):
// then up to that many concurrent callers of the same spec share it, one
// process and one copy of the weights, each call with a decoding state of
// its own. Its lease starts at Spec.MemoryBytes (the shared part and one
// stream), grows by Spec.StreamBytes through the engine's Resize when a
// caller joins (only when that fits on its GPU now: otherwise the caller
// starts an instance of its own where a whole one fits, or waits in the
// placement queue and joins once a stream fits) and shrinks by as much
// when a caller releases. Concurrent first callers start one instance and
// join it, not one each. With MaxStreams <= 1, concurrent callers get
// separate instances with separate leases. After release an instance stays
// warm for Spec.KeepAlive (0: [backends] keep_alive; negative: not at all);
// a later Acquire with the same backend, model path, load options and device
// (and a lease at least as large) gets it back without a reload; its lease
// is then back at one stream's size. An idle
// instance's lease is marked reclaimable; when any lease request does not
// fit, the placement engine asks such leases back (EventReclaim, least
// recently used first) and the host stops those instances (reclaim.go). A
// load waiting for memory takes an idle instance of its own spec instead.
//
// # Crashes
//
// A backend that dies, or answers plugins.ErrUnavailable, during a call is
// reported (an error log line and an EventCrashed to Options.OnEvent), then
// restarted under the same lease with the same environment and its model
// reloaded, before the failing call returns its error (which still unwraps
// to plugins.ErrUnavailable); the next call on the instance uses the new
// process. With several streams in flight, the first call to see the crash
// restarts the backend, once; the others' calls wait for that restart and
// then fail with plugins.ErrUnavailable too, so each job is retried on the
// restarted process. Idle instances are health-checked every [backends]
// health_interval and restarted the same way. After [backends] max_restarts
// restarts, or when its lease ends under it, an instance is given up: calls
// fail with ErrGivenUp (which also unwraps to plugins.ErrUnavailable) and
// release drops it. Every path that drops an instance (keep-alive, eviction,
// failure, start-up errors, shutdown) kills its process and releases its
// lease, so no lease outlives its backend. The other way round, backends get
// a parent-death signal (SIGKILL): a daemon killed outright takes its
// backends with it, and the next daemon releases the leases at recovery.
//
// # Concurrency
//
// One mutex, Host.mu, guards the table of instances and every instance's
// mutable fields; it is never held across a blocking call (process start,
// RPC, lease operation). An instance is owned by whoever checked it out (a
// caller, a health check or the code dropping it): only the owner starts,
// restarts or stops its process, so those slow steps need no lock. The
// callers of a shared instance own it together: the one that started it
// owns the start (joiners wait until it is busy), the one whose call saw the
// process die owns the restart (the state says restarting; no one joins),
// and the last to release it makes it idle or drops it; stopping needs the
// state stopping, which only one path sets. Its lease's size is changed by
// one Resize at a time (worker.sizeMu), each applied to the size the last
// one left. Run is
// the one goroutine that expires idle instances, renews leases and starts
// health checks, on a single timer reset to the next deadline.
package host
