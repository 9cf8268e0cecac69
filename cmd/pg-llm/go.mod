module github.com/powerglide/powerglide/cmd/pg-llm

go 1.26.0

require github.com/powerglide/powerglide/pkg v0.0.0

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/alecthomas/mango-kong v0.1.0 // indirect
	github.com/itchyny/gojq v0.12.20 // indirect
	github.com/itchyny/timefmt-go v0.1.9 // indirect
	github.com/muesli/mango v0.1.1-0.20220205060214-77e2058169ab // indirect
	github.com/muesli/roff v0.1.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/term v0.47.0 // indirect
)

replace github.com/powerglide/powerglide/pkg => ../../pkg
