package dash

// tailBacklog is how much of an existing file a first read looks at: the
// dashboard shows recent events, not a whole day's log.
const tailBacklog = 512 << 10
