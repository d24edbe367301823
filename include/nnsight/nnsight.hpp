// nnsight for C++: everything a user includes (rich notebook display is in
// <nnsight/display.hpp>, forward-hook plugins use <nnsight/forward_hook.hpp>,
// capture readers <nnsight/capture.hpp>).
#pragma once

#include <nnsight/attached.hpp>
#include <nnsight/call_site.hpp>
#include <nnsight/engine_args.hpp>
#include <nnsight/envoy.hpp>
#include <nnsight/error.hpp>
#include <nnsight/functions.hpp>
#include <nnsight/index.hpp>
#include <nnsight/interrupt.hpp>
#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>
#include <nnsight/logit_lens.hpp>
#include <nnsight/proxy.hpp>
#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>
#include <nnsight/saved.hpp>
#include <nnsight/scan_result.hpp>
#include <nnsight/source_location.hpp>
#include <nnsight/tracer.hpp>
