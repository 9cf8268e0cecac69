package pgstore

import "strings"

// The journal records of the one-statement changes (claim, renew,
// complete), as migration 002's task_event writes them, but spelled out
// with built-in functions only: a fresh backend (each pg-queue command
// gets one) then has no function bodies of ours to look up, parse and
// inline when it plans the statement, once per call site.

// nowRFC3339 is rfc3339(now()): the time as Go's encoding/json writes it
// in UTC.
const nowRFC3339 = `to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
		|| rtrim(rtrim(to_char(now() AT TIME ZONE 'UTC', '.US'), '0'), '.') || 'Z'`

// secondsRFC3339 is rfc3339s(x): the time x to the second, as Go's
// time.RFC3339 writes it in UTC.
func secondsRFC3339(x string) string {
	return `to_char((` + x + `) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`
}

// taskEvent is task_event(now(), op, task, worker, token, status, reason):
// op and status are words (status "" for none), the others SQL
// expressions (worker, token and reason "" for none; reason is json).
func taskEvent(op, task, worker, token, status, reason string) string {
	word := func(w string) string {
		if strings.ContainsAny(w, `'"\`) {
			panic("pgstore: not a word: " + w)
		}
		return `"` + w + `"`
	}
	e := `'{"type":"task","ts":"' || ` + nowRFC3339 + ` || '","op":` + word(op) + `,"task":' || to_json(` + task + `)::text`
	if worker != "" {
		e += `
		|| CASE WHEN coalesce(` + worker + `, '') <> '' THEN ',"worker":' || to_json(` + worker + `)::text ELSE '' END`
	}
	if token != "" {
		e += `
		|| CASE WHEN coalesce(` + token + `, 0) <> 0 THEN ',"token":' || (` + token + `)::text ELSE '' END`
	}
	if status != "" {
		e += ` || ',"status":` + word(status) + `'`
	}
	if reason != "" {
		e += `
		|| CASE WHEN (` + reason + `) IS NOT NULL AND (` + reason + `)::text <> '""' THEN ',"reason":' || (` + reason + `)::text ELSE '' END`
	}
	return e + ` || '}'`
}
