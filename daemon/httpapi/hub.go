package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsched/wsched/placement"
)

// streamBuffer is how many placement events one stream may fall behind
// before it is dropped (ends with "lagged"; the client reconnects).
const streamBuffer = 256

// hub fans placement events out to the API's event streams (/v1/events and
// the monitor): one engine subscription, whatever the number of streams, so
// the engine's owner loop pays for one reader, not for every client, and
// none while no stream is open (the lease path then wakes nobody here). One
// goroutine (run) owns the streams; a stream whose buffer is full is
// dropped, never waited for. [limits] subscribers bounds the streams of one
// uid, [limits] token_subscribers those of the TCP token's bearer (all TCP
// clients together, like one uid).
type hub struct {
	eng     Engine
	perUID  int
	perTok  int // streams of the TCP token
	ops     chan func(map[*hubStream]struct{})
	stopped chan struct{}
}

type hubStream struct {
	ch      chan placement.Event
	limited bool
	uid     int // owner(peer).UID: -1 for the TCP token
}

// bound is the stream cap of st's user and the setting that sets it.
func (h *hub) bound(st *hubStream) (int, string) {
	if st.uid < 0 {
		return h.perTok, "token_subscribers"
	}
	return h.perUID, "subscribers"
}

// who names a limited stream's user in a refusal.
func (st *hubStream) who() string {
	if st.uid < 0 {
		return "the TCP token"
	}
	return fmt.Sprintf("uid %d", st.uid)
}

// errHubStopped answers subscriptions after the daemon began to stop.
var errHubStopped = errors.New("event streams stopped: the daemon is shutting down")

func newHub(eng Engine, perUID, perToken int) *hub {
	return &hub{eng: eng, perUID: perUID, perTok: perToken, ops: make(chan func(map[*hubStream]struct{})), stopped: make(chan struct{})}
}

// run follows the engine's events until ctx ends, then ends every stream.
func (h *hub) run(ctx context.Context) error {
	defer close(h.stopped)
	streams := map[*hubStream]struct{}{}
	defer func() {
		for st := range streams {
			close(st.ch)
		}
	}()
	for ctx.Err() == nil {
		var op func(map[*hubStream]struct{})
		if len(streams) == 0 { // nobody listens: no subscription until a stream opens
			select {
			case <-ctx.Done():
				return nil
			case op = <-h.ops:
			}
		}
		// Subscribed before the stream is added, so it misses no event.
		events, cancel, err := h.eng.Subscribe(ctx)
		if op != nil {
			op(streams)
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, placement.ErrStopped) {
				return nil
			}
			return err
		}
		if len(streams) > 0 {
			h.follow(ctx, events, streams)
		}
		cancel()
	}
	return nil
}

// follow fans out one engine subscription until it or ctx ends, or the last
// stream is gone. When the engine drops the hub itself, every stream missed
// events: all are ended.
func (h *hub) follow(ctx context.Context, events <-chan placement.Event, streams map[*hubStream]struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-h.ops:
			if op(streams); len(streams) == 0 {
				return
			}
		case ev, ok := <-events:
			if !ok {
				for st := range streams {
					close(st.ch)
					delete(streams, st)
				}
				return
			}
			for st := range streams {
				select {
				case st.ch <- ev:
				default:
					close(st.ch) // fell behind: dropped, the client sees "lagged"
					delete(streams, st)
				}
			}
		}
	}
}

// subscribe opens a stream for peer; its channel closes when the stream
// falls behind or the daemon stops. The returned function ends it.
func (h *hub) subscribe(ctx context.Context, peer Peer) (<-chan placement.Event, func(), error) {
	st := &hubStream{ch: make(chan placement.Event, streamBuffer), limited: limited(peer) || !peer.Known, uid: owner(peer).UID}
	errc := make(chan error, 1)
	add := func(streams map[*hubStream]struct{}) {
		if max, key := h.bound(st); st.limited && max > 0 {
			n := 0
			for o := range streams {
				if o.limited && o.uid == st.uid {
					n++
				}
			}
			if n >= max {
				errc <- limitExceeded("%s has %d event streams open: [limits] %s is %d", st.who(), n, key, max)
				return
			}
		}
		streams[st] = struct{}{}
		errc <- nil
	}
	select {
	case h.ops <- add:
	case <-h.stopped:
		return nil, nil, errHubStopped
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if err := <-errc; err != nil {
		return nil, nil, err
	}
	remove := func(streams map[*hubStream]struct{}) {
		if _, ok := streams[st]; ok {
			close(st.ch)
			delete(streams, st)
		}
	}
	cancel := func() {
		select {
		case h.ops <- remove:
		case <-h.stopped:
		}
	}
	return st.ch, cancel, nil
}

// RunEvents runs the fan-out of placement events to the API's streams
// until ctx ends (start it with the server).
func (s *Server) RunEvents(ctx context.Context) error { return s.hub.run(ctx) }
