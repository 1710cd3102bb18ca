package natsx

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// PurgeSubject removes every message stored on subject (a literal subject
// or a filter with wildcards) from stream and returns how many there were.
// Unlike a KV Delete or Purge it leaves no marker behind: nothing stored
// names the subject afterwards.
func PurgeSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	st, err := Call(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, stream) })
	if err != nil {
		return 0, fmt.Errorf("open stream %s: %w", stream, err)
	}
	info, err := Call(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return st.Info(ctx, jetstream.WithSubjectFilter(subject))
	})
	if err != nil {
		return 0, fmt.Errorf("count %s in stream %s: %w", subject, stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := Call(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, st.Purge(ctx, jetstream.WithPurgeSubject(subject))
	}); err != nil {
		return 0, fmt.Errorf("purge %s from stream %s: %w", subject, stream, err)
	}
	return n, nil
}

// PurgeKeys removes the keys of bucket that match key (a key or a filter
// such as "tenant.skills.*") with every revision and marker, so that no
// stored message names them; it returns how many messages were removed.
func PurgeKeys(ctx context.Context, js jetstream.JetStream, bucket, key string) (uint64, error) {
	return PurgeSubject(ctx, js, "KV_"+bucket, "$KV."+bucket+"."+key)
}
