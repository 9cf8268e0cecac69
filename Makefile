# powerglide — build, test and generate everything from one place.
# `make demo` and `make test` are the two commands a new user runs.

GO       ?= go
TOOLS    := $(sort $(notdir $(wildcard cmd/pg-*)))
BIN      := bin
PREFIX   ?= $(HOME)/.local
VERSION  := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/powerglide/powerglide/pkg/cli.Version=$(VERSION)
PKG      := github.com/powerglide/powerglide/pkg/...
CMDS     := $(addprefix ./cmd/,$(TOOLS))
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build install test test-unit test-deps bench lint vet man completions schemas docs generate check-generated demo demo-record clean

all: build

build: ## build every tool into ./bin
	@mkdir -p $(BIN)
	@for t in $(TOOLS); do \
		echo "go build $$t"; \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/$$t ./cmd/$$t || exit 1; \
	done

install: build man ## install the tools, man pages and completions under PREFIX (default ~/.local)
	install -d $(PREFIX)/bin $(PREFIX)/share/man/man1
	install -m 755 $(addprefix $(BIN)/,$(TOOLS)) $(PREFIX)/bin/
	install -m 644 $(wildcard man/pg-*.1) $(PREFIX)/share/man/man1/
	install -d $(PREFIX)/share/bash-completion/completions $(PREFIX)/share/zsh/site-functions $(PREFIX)/share/fish/vendor_completions.d
	-install -m 644 $(wildcard completions/bash/*) $(PREFIX)/share/bash-completion/completions/
	-install -m 644 $(wildcard completions/zsh/*) $(PREFIX)/share/zsh/site-functions/
	-install -m 644 $(wildcard completions/fish/*) $(PREFIX)/share/fish/vendor_completions.d/

test: check-generated lint test-deps ## everything CI runs: generated files current, vet and staticcheck, unit and e2e tests with -race
	$(GO) test -race -count=1 -timeout 15m -parallel 6 $(PKG)

test-unit: test-deps ## every test without the race detector (quicker); installs the test deps first, as make test does
	$(GO) test -count=1 -short $(PKG)

test-deps: ## install what the tests need that Go does not bring (npm MCP servers)
	@scripts/test-deps.sh

bench: build ## run every tool's benchmarks and write BENCHMARKS.md (about 17 minutes on an idle 2-core machine; not part of make test)
	@scripts/bench.sh

vet:
	$(GO) vet $(PKG) $(CMDS)

lint: vet ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l pkg cmd); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) run $(STATICCHECK) $(PKG) $(CMDS)

schemas: ## regenerate pkg/protocol/schemas from the Go types
	@scripts/gen-schemas.sh

man: build ## regenerate man/pg-*.1 from the kong models
	@mkdir -p man
	@for t in $(TOOLS); do $(BIN)/$$t man > man/$$t.1 || exit 1; done

completions: build ## regenerate completions/{bash,zsh,fish}
	@mkdir -p completions/bash completions/zsh completions/fish
	@for t in $(TOOLS); do \
		$(BIN)/$$t completion bash > completions/bash/$$t && \
		$(BIN)/$$t completion zsh > completions/zsh/_$$t && \
		$(BIN)/$$t completion fish > completions/fish/$$t.fish || exit 1; \
	done

docs: schemas ## regenerate docs/protocol.md from the schemas
	@cd pkg && $(GO) run ./protocol/internal/gendocs ../docs/protocol.md

generate: schemas docs man completions

check-generated: generate ## fail when committed generated files are stale
	@scripts/check-generated.sh

demo: build ## run the demo swarm (replay, or the live provider when an API key is set)
	@scripts/demo.sh

demo-record: build ## re-record testdata/demo/session.jsonl against the local scripted model
	@scripts/demo.sh --record

clean:
	rm -rf $(BIN)
