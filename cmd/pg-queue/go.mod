module github.com/powerglide/powerglide/cmd/pg-queue

go 1.26.0

require github.com/powerglide/powerglide/pkg v0.0.0

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/alecthomas/mango-kong v0.1.0 // indirect
	github.com/gofrs/flock v0.13.1 // indirect
	github.com/itchyny/gojq v0.12.20 // indirect
	github.com/itchyny/timefmt-go v0.1.9 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/muesli/mango v0.1.1-0.20220205060214-77e2058169ab // indirect
	github.com/muesli/roff v0.1.0 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/term v0.47.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/powerglide/powerglide/pkg => ../../pkg
