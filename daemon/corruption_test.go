package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// The corruption campaign of issue 25 (`make corruption N=…`): real daemon
// processes (this test binary, re-executed) on a temporary state dir, real
// holder processes keeping leases, the state files damaged — a flipped
// bit, zeroed bytes, a cut or a deletion, of the journal, the database and
// the epoch — while the holders live, and the daemon restarted. Each trial
// is one of: refused with an error naming the damaged file ("refused");
// started with every live lease ("restored"); started without one
// (SILENT LOSS), or granting bytes a live lease holds (DOUBLE GRANT). A
// refused state is then repaired (`wsched state repair`) and started again,
// and what repair brought back is counted.

// corruptHelperEnv names the helper a re-executed test binary runs.
const corruptHelperEnv = "WSCHED_CORRUPT_HELPER"

func init() { // before TestMain: the helpers are not tests
	switch os.Getenv(corruptHelperEnv) {
	case "daemon":
		os.Exit(campaignDaemon(os.Args[1:]))
	case "holder":
		os.Exit(campaignHolder(os.Args[1:]))
	}
}

const campaignGPU = 64 * GiB

func campaignConfig(stateDir, socket string) *config.Config {
	cfg := config.Defaults()
	cfg.Daemon.StateDir, cfg.Daemon.Socket, cfg.Daemon.SocketMode = stateDir, socket, 0o666
	cfg.Placement.Reserved, cfg.Placement.SafetyFactor = 0, 1
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.RefreshInterval = units.Duration(100 * time.Millisecond)
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(campaignGPU)}}
	return cfg
}

// campaignDaemon serves until SIGTERM; a start that fails prints the error
// and exits 3.
func campaignDaemon(args []string) int {
	cfg := campaignConfig(args[0], args[1])
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	d, err := New(Options{Config: cfg, Log: log})
	if err == nil {
		err = d.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "START FAILED:", err)
		return 3
	}
	return 0
}

// campaignHolder takes count leases of bytes each, prints their IDs, and
// lives until its stdin closes.
func campaignHolder(args []string) int {
	socket := args[0]
	bytes, _ := strconv.ParseInt(args[1], 10, 64)
	count, _ := strconv.Atoi(args[2])
	c := client.New(socket)
	for range count {
		l, err := c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: bytes, TTLSeconds: 600})
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		fmt.Println(l.ID)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

type campaignProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	done   chan error
}

func startHelper(t *testing.T, helper string, args ...string) *campaignProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), corruptHelperEnv+"="+helper)
	p := &campaignProc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	return p
}

// holder starts a holder process and returns it with its lease IDs.
func campaignHold(t *testing.T, socket string, bytes int64, count int) (*campaignProc, []string) {
	t.Helper()
	p := startHelper(t, "holder", socket, strconv.FormatInt(bytes, 10), strconv.Itoa(count))
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stdin.Close(); p.cmd.Process.Kill(); <-p.done })
	stuck := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() }) // bounds the wait below
	defer stuck.Stop()
	sc := bufio.NewScanner(out)
	var ids []string
	for len(ids) < count && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ERR") {
			t.Fatalf("holder: %s", sc.Text())
		}
		ids = append(ids, sc.Text())
	}
	if len(ids) != count {
		t.Fatalf("holder got %d of %d leases: %s", len(ids), count, p.stderr)
	}
	return p, ids
}

// daemonUp starts a daemon process; ok is false (with its error output)
// when it exits before it is healthy.
func daemonUp(t *testing.T, stateDir, socket string) (p *campaignProc, ok bool) {
	t.Helper()
	_ = os.Remove(socket)
	p = startHelper(t, "daemon", stateDir, socket)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	c := client.New(socket)
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			p.done <- err
			return p, false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Health(ctx)
		cancel()
		if err == nil {
			return p, true
		}
	}
	t.Fatalf("daemon neither started nor failed in 30 s: %s", p.stderr)
	return nil, false
}

func (p *campaignProc) stop(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// trialResult is one trial's row.
type trialResult struct {
	damage, outcome, repair string
	lost, doubled           bool
}

// campaignTrial builds a state with live holders, damages it, restarts
// the daemon and classifies what it did.
func campaignTrial(t *testing.T, rng *rand.Rand) trialResult {
	dir := testtmp.ShortDir(t)
	stateDir, socket := filepath.Join(dir, "state"), filepath.Join(dir, "s.sock")
	d, ok := daemonUp(t, stateDir, socket)
	if !ok {
		t.Fatalf("first start: %s", d.stderr)
	}
	_, a := campaignHold(t, socket, 2*GiB, 3)
	d.stop(syscall.SIGTERM) // a graceful stop folds A's leases into bbolt
	if d, ok = daemonUp(t, stateDir, socket); !ok {
		t.Fatalf("second start: %s", d.stderr)
	}
	_, b := campaignHold(t, socket, 3*GiB, 3)
	c := client.New(socket)
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Release(rctx, a[0]); err != nil {
		t.Fatal(err)
	}
	gone, _ := campaignHold(t, socket, GiB, 1)
	gone.stdin.Close() // this holder exits: its lease is released
	<-gone.done
	gone.done <- nil
	c.Close()
	time.Sleep(300 * time.Millisecond) // the exit is seen; the journal's length is recorded
	kill := rng.IntN(2) == 0
	if kill {
		d.stop(syscall.SIGKILL)
	} else {
		d.stop(syscall.SIGTERM)
	}
	live := append(slices.Clone(a[1:]), b...)
	liveBytes := 2*2*GiB + 3*3*GiB
	damage := damageState(t, rng, stateDir)
	if kill {
		damage += " (after kill -9)"
	} else {
		damage += " (after a stop)"
	}
	res := trialResult{damage: damage}
	d, ok = daemonUp(t, stateDir, socket)
	if ok {
		res.outcome, res.lost, res.doubled = judgeStart(t, socket, live, int64(liveBytes))
		d.stop(syscall.SIGTERM)
		return res
	}
	res.outcome = judgeRefusal(d.stderr.String(), stateDir)
	if _, err := store.Repair(stateDir, time.Now()); err != nil {
		res.repair = "repair failed: " + err.Error()
		return res
	}
	if d, ok = daemonUp(t, stateDir, socket); !ok {
		res.repair = "start after repair failed"
		return res
	}
	o, lost, doubled := judgeStart(t, socket, live, int64(liveBytes))
	res.repair = o
	if lost || doubled { // repair said what it could not restore
		res.repair = "repair could not restore some (it reports them)"
	}
	d.stop(syscall.SIGTERM)
	return res
}

// judgeStart compares the started daemon's leases with the live ones and
// asks for one byte more than is truly free.
func judgeStart(t *testing.T, socket string, live []string, liveBytes int64) (string, bool, bool) {
	c := client.New(socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range ls {
		if l.State == "granted" {
			have[l.ID] = true
		}
	}
	missing := 0
	for _, id := range live {
		if !have[id] {
			missing++
		}
	}
	probe, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: campaignGPU - liveBytes + 1})
	doubled := err == nil
	if doubled {
		_, _ = c.Release(ctx, probe.ID)
	}
	switch {
	case missing > 0 && doubled:
		return fmt.Sprintf("SILENT LOSS (%d of %d) + DOUBLE GRANT", missing, len(live)), true, true
	case missing > 0:
		return fmt.Sprintf("SILENT LOSS (%d of %d)", missing, len(live)), true, false
	case doubled:
		return "DOUBLE GRANT", false, true
	}
	return fmt.Sprintf("restored all %d", len(live)), false, false
}

// judgeRefusal says whether a refused start named the damage clearly: the
// state is damaged, which file, and no panic or fault.
func judgeRefusal(stderr, stateDir string) string {
	clear := strings.Contains(stderr, "START FAILED") && strings.Contains(stderr, stateDir) &&
		(strings.Contains(stderr, "damaged") || strings.Contains(stderr, "corrupt"))
	if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "SIGBUS") || strings.Contains(stderr, "fatal error") {
		clear = false
	}
	if clear {
		return "refused (clear error)"
	}
	line := stderr
	if len(line) > 200 {
		line = line[:200]
	}
	return "REFUSED UNCLEARLY: " + strings.ReplaceAll(line, "\n", " ")
}

// damageState applies one random damage to the state files.
func damageState(t *testing.T, rng *rand.Rand, dir string) string {
	files := []string{store.WALName, store.FileName, store.EpochName}
	ops := []string{"flip", "zero", "truncate", "delete"}
	name, op := files[rng.IntN(len(files))], ops[rng.IntN(len(ops))]
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	span := len(data)
	if name == store.WALName && rng.IntN(4) != 0 { // mostly where the records are
		span = min(span, 8192)
	}
	at := rng.IntN(max(span, 1))
	switch op {
	case "flip":
		data[at] ^= 1 << rng.IntN(8)
	case "zero":
		n := 1 + rng.IntN(4096)
		clear(data[at:min(len(data), at+n)])
		op = fmt.Sprintf("zero %d bytes", min(n, len(data)-at))
	case "truncate":
		data = data[:at]
	case "delete":
		if rng.IntN(3) == 0 { // with the epoch
			other := store.EpochName
			if name == store.EpochName {
				other = store.FileName
			}
			_ = os.Remove(filepath.Join(dir, other))
			name += "+" + other
		}
		_ = os.Remove(path)
		return "delete " + name
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %s at %d", op, name, at)
}

// TestCorruptionCampaign runs WSCHED_CORRUPTION trials (`make corruption
// N=…`) and prints the table; it fails on any silent loss, double grant
// or unclear refusal.
func TestCorruptionCampaign(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("WSCHED_CORRUPTION"))
	if n <= 0 {
		t.Skip("run by `make corruption N=…` (WSCHED_CORRUPTION is the number of trials)")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("WSCHED_CORRUPTION_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, 25))
	counts := map[string]int{}
	repairs := map[string]int{}
	var bad []string
	for i := range n {
		var res trialResult
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { res = campaignTrial(t, rng) })
		kind := res.outcome
		if strings.HasPrefix(kind, "restored all") {
			kind = "restored all"
		}
		counts[kind]++
		if res.repair != "" {
			r := res.repair
			if strings.HasPrefix(r, "restored all") {
				r = "restored all"
			}
			repairs[r]++
		}
		if res.lost || res.doubled || strings.HasPrefix(res.outcome, "REFUSED UNCLEARLY") {
			bad = append(bad, fmt.Sprintf("trial %d: %s: %s", i, res.damage, res.outcome))
		}
		t.Logf("trial %d: %s → %s %s", i, res.damage, res.outcome, res.repair)
	}
	table := campaignTable(n, seed, counts, repairs)
	fmt.Print(table)
	if out := os.Getenv("WSCHED_CORRUPTION_TABLE"); out != "" {
		_ = os.WriteFile(out, []byte(table), 0o644)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func campaignTable(n int, seed uint64, counts, repairs map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "corruption campaign: %d trials (seed %d)\n", n, seed)
	fmt.Fprintf(&b, "| %-40s | %6s |\n|%s|%s|\n", "restart outcome", "trials", strings.Repeat("-", 42), strings.Repeat("-", 8))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "| %-40s | %6d |\n", k, counts[k])
	}
	lost, doubled := 0, 0
	for k, v := range counts {
		if strings.Contains(k, "SILENT LOSS") {
			lost += v
		}
		if strings.Contains(k, "DOUBLE GRANT") {
			doubled += v
		}
	}
	fmt.Fprintf(&b, "silent losses: %d, double grants: %d\n", lost, doubled)
	if len(repairs) > 0 {
		fmt.Fprintf(&b, "| %-40s | %6s |\n|%s|%s|\n", "refused, then `state repair` and start", "trials", strings.Repeat("-", 42), strings.Repeat("-", 8))
		for _, k := range slices.Sorted(maps.Keys(repairs)) {
			fmt.Fprintf(&b, "| %-40s | %6d |\n", k, repairs[k])
		}
	}
	return b.String()
}
