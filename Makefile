# Developer entry points. `make test` is what CI runs (.ci/run); every target installs what it needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
NODES ?= 3
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all deps build lint typecheck format test test-unit test-protocol test-cluster proto \
	cluster-tools cluster-up cluster-down bench-plugin clean

all: build

# npm ci only when the lock file changed since the last install.
node_modules/.install-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

deps: node_modules/.install-stamp

build: deps
	npx tsc -p tsconfig.build.json
	printf '{"gitCommit":"%s"}\n' "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" > dist/build-info.json
	chmod +x dist/cli/main.js

typecheck: deps
	npx tsc -p tsconfig.json --noEmit

lint: deps typecheck
	npx eslint .
	npx prettier --check .

format: deps
	npx prettier --write .

test: build lint test-unit test-protocol test-cluster

test-unit: deps
	npx vitest run --project unit

test-protocol: build
	npx vitest run --project protocol

test-cluster: build cluster-tools
	npx vitest run --project cluster

proto: deps
	tools/proto/generate.sh

cluster-tools:
	@tools/cluster/build.sh

cluster-up: cluster-tools
	tools/cluster/up.sh --nodes $(NODES)

cluster-down:
	tools/cluster/down.sh

bench-plugin: build
	node --expose-gc --import tsx bench/plugin.bench.ts

clean:
	rm -rf dist .local
