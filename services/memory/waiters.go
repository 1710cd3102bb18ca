package memory

import "sync"

// waiters lets AddEpisode calls with wait=true sleep until this replica
// finishes their episode: one channel per episode, closed when it is
// synced or failed. The map is bounded; a call that finds it full polls
// the store instead (as it must anyway for episodes another replica
// processes).
type waiters struct {
	mu  sync.Mutex
	max int
	m   map[string]*waiter
}

type waiter struct {
	done chan struct{}
	refs int
}

func newWaiters(max int) *waiters {
	return &waiters{max: max, m: make(map[string]*waiter)}
}

// add registers interest in episode id. It returns the channel closed when
// the episode is finished here and the release the caller must call when
// it stops waiting; ok is false when the map is full (nil channel, no-op
// release).
func (w *waiters) add(id string) (done <-chan struct{}, release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[id]
	if e == nil {
		if len(w.m) >= w.max {
			return nil, func() {}, false
		}
		e = &waiter{done: make(chan struct{})}
		w.m[id] = e
	}
	e.refs++
	var once sync.Once
	return e.done, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			e.refs--
			if e.refs == 0 && w.m[id] == e {
				delete(w.m, id)
			}
		})
	}, true
}

// notify wakes every call waiting for episode id.
func (w *waiters) notify(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[id]; e != nil {
		close(e.done)
		delete(w.m, id)
	}
}

// len is how many episodes are waited for.
func (w *waiters) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
