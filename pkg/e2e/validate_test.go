package e2e

import (
	"github.com/powerglide/powerglide/pkg/protocol/validate"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdValidate checks that a file holds valid records of a schema:
//
//	validate SCHEMA FILE          every JSONL line of FILE
//	validate -doc SCHEMA FILE     FILE as one JSON document
func cmdValidate(ts *testscript.TestScript, neg bool, args []string) {
	doc := len(args) > 0 && args[0] == "-doc"
	if doc {
		args = args[1:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: validate [-doc] SCHEMA FILE")
	}
	data := ts.ReadFile(args[1])
	var err error
	if doc {
		err = validate.JSON(args[0], []byte(data))
	} else {
		err = validate.Lines(args[0], []byte(data))
	}
	if neg {
		if err == nil {
			ts.Fatalf("%s unexpectedly valid as %s", args[1], args[0])
		}
		return
	}
	if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
}
