// Package placement decides where GPU memory goes: it keeps the leases, the
// queue of requests waiting for memory and the per-GPU accounting, and picks
// GPUs by policy. It is pure: it takes inventory snapshots and requests and
// returns decisions, with no I/O of its own and an injected clock.
//
// # Accounting
//
// One formula, used everywhere available memory is shown or decided on (the
// API, `wsched gpus`, metrics, grants). Per GPU:
//
//	usable      = (total − reserved) × safety_factor
//	leased      = Σ granted leases on the GPU
//	attributed  = NVML-used memory of processes that hold a lease on the GPU
//	foreign     = used − attributed   (processes without a lease + driver overhead)
//	unrealized  = Σ over leases of max(0, lease − memory its processes use)
//	available   = min(usable − leased − foreign, free − unrealized)
//
// The first term is the budget: what wsched may hand out after reserving
// headroom and counting memory it does not control. The second keeps the
// budget honest against the hardware: bytes promised to leases but not yet
// allocated by their holders must still be free on the GPU. When holders stay
// within their leases the two agree (for reserved = 0, safety_factor = 1); when
// a holder overruns its lease, or a foreign process grows between readings, the
// second is smaller and wins. Available may go below zero when the GPU is
// overcommitted; it is shown as 0.
//
// Worked example (the seed's RTX 4090 server, reserved = 512 MiB,
// safety_factor = 0.95). GPU 0: total 23.69 GiB, used 21.23 GiB by three
// processes without leases, free 2.46 GiB:
//
//	usable    = (23.69 − 0.50) × 0.95 = 22.03 GiB
//	foreign   = 21.23 − 0            = 21.23 GiB
//	available = min(22.03 − 0 − 21.23, 2.46 − 0) = 0.80 GiB
//
// GPU 1: total 23.69 GiB, 0.23 GiB driver overhead, one 4 GiB lease whose
// holder has allocated 1.50 GiB so far (used 1.73, free 21.96):
//
//	usable     = 22.03 GiB
//	attributed = 1.50, foreign = 1.73 − 1.50 = 0.23, unrealized = 4 − 1.50 = 2.50
//	available  = min(22.03 − 4 − 0.23, 21.96 − 2.50) = min(17.80, 19.46) = 17.80 GiB
//
// reserved (default and per GPU index or UUID), safety_factor and min_free_warn
// come from the [placement] section of the configuration.
package placement
