#!/usr/bin/env bash
# examples/steering_plugin on the default model: the same greedy generation
# with and without the plugin's add_direction hook on layer 10; the hook must
# change the text.
#   steering_plugin_example_test.sh NNSIGHT_CLI LIBSTEERING_PLUGIN
set -euo pipefail
cli="$1" plugin="$2"
prompt="My opinion of the weather today is that"
# A direction along the first 64 features of the residual stream.
direction="$(for i in $(seq 64); do printf '1.0,'; done; for i in $(seq 511); do printf '0,'; done; printf '0')"
hooks="[{\"name\": \"steer\", \"target_modules\": [\"model.layers.10\"], \"hook_factory\": \"$plugin:add_direction\",
         \"config\": {\"direction\": [$direction], \"alpha\": 8.0}}]"
base="$("$cli" generate --model smollm2-135m --prompt "$prompt" --max-tokens 12 --no-progress)"
steered="$("$cli" generate --model smollm2-135m --prompt "$prompt" --max-tokens 12 --no-progress --forward-hooks "$hooks")"
printf 'baseline: %s\nsteered:  %s\n' "$base" "$steered"
[ -n "$steered" ] && [ "$base" != "$steered" ] || { echo "plugin example: the hook did not change the text"; exit 1; }
echo "plugin example: ok"
