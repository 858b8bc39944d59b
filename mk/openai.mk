# The `openai` npm package — an OpenAI client nobody here wrote — for the test
# that points it at the daemon's TCP listener (daemon/openai_node_test.go).
# Pinned; installed under .cache/node by `make deps` (Node.js from Debian when
# missing). openai 7.x needs Node >= 22; 6.x runs on Debian's Node.
OPENAI_NPM_VERSION ?= 6.30.1
NODE_DIR           := $(CURDIR)/.cache/node

.PHONY: openai-client
deps: openai-client

openai-client: $(NODE_DIR)/node_modules/openai/package.json

$(NODE_DIR)/node_modules/openai/package.json:
	@command -v npm >/dev/null 2>&1 || { echo "openai-client: installing nodejs and npm"; \
		apt-get install -y -q --no-install-recommends nodejs npm; }
	npm install --no-audit --no-fund --loglevel=error --prefix $(NODE_DIR) openai@$(OPENAI_NPM_VERSION)
