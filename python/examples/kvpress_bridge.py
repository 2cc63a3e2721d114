#!/usr/bin/env python3
"""Scores of a kvpress press for an obcache trace.

Runs the prefill of the trace's prompt through the model with Hugging Face
transformers under a kvpress ScorerPress (KnormPress, SnapKVPress,
TOVAPress, ExpectedAttentionPress, ... or your own), records the scores the
press computes in every layer, and writes them as an obcache score file:
kvpress's ranking, refereed by obcache's oracle, recall, replay and eval.

  kvpress_bridge.py TRACE --model MODEL --press SnapKVPress:window_size=64 -o S.h5
  obcache analyze TRACE --score snapkv_kvpress=file:S.h5

or once per eval sample (TRACE, MODEL and the output from the environment):

  obcache eval ... --score-cmd kv_snapkv='python3 kvpress_bridge.py --press SnapKVPress'

MODEL is a Hugging Face folder or a GGUF file (transformers dequantises it;
the `gguf` package is needed). The prompt is the trace's own token ids. With
--protocol agnostic (the default, kvpress's pipeline and obcache eval's) the
prefill is the context alone, the positions before the question, and the
scores cover those candidates; with aware, the whole prompt.

kvpress, torch and transformers are not obcache's dependencies: install them
yourself (pip install kvpress).
"""
import argparse
import ast
import os
import sys

import numpy as np

import obcache


def make_press(spec):
    """A press from "Class" or "Class:key=value,key=value" (values as Python
    literals), e.g. "SnapKVPress:window_size=64"."""
    import kvpress

    name, _, args = spec.partition(":")
    cls = getattr(kvpress, name, None)
    if cls is None or not isinstance(cls, type) or not issubclass(cls, kvpress.ScorerPress):
        sys.exit(f"kvpress_bridge: {name}: not a kvpress ScorerPress (one with a score method)")
    kwargs = {}
    for item in filter(None, args.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            sys.exit(f"kvpress_bridge: --press {spec}: expected key=value, got {item!r}")
        kwargs[key] = ast.literal_eval(value)
    return cls(**kwargs)


def load_model(path):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    options = dict(dtype=torch.float32, attn_implementation="eager")
    if os.path.isfile(path):  # a GGUF file
        return AutoModelForCausalLM.from_pretrained(
            os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), **options
        )
    return AutoModelForCausalLM.from_pretrained(path, **options)


def press_scores(model, press, ids, n_layers):
    """(n_layers, kv_heads, len(ids)) float64: what press.score returns in
    each layer during the prefill of ids."""
    import torch
    from transformers import DynamicCache

    recorded = {}
    score = press.score

    def record(module, hidden_states, keys, values, attentions, kwargs):
        s = score(module, hidden_states, keys, values, attentions, kwargs)
        recorded[module.layer_idx] = s[0].detach().to(torch.float64).cpu().numpy()
        return s

    press.score = record
    # A ScorerPress scores only when it compresses; what it then drops from
    # the cache does not reach the prefill's own outputs.
    if press.compression_ratio == 0:
        press.compression_ratio = 0.5
    with torch.no_grad(), press(model):
        model(input_ids=torch.tensor([ids]), past_key_values=DynamicCache(), use_cache=True)
    missing = [l for l in range(n_layers) if l not in recorded]
    if missing:
        sys.exit(f"kvpress_bridge: the press scored no positions in layers {missing}")
    return np.stack([recorded[l] for l in range(n_layers)])


def main():
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default=env("OBC_TRACE"), help="default $OBC_TRACE")
    parser.add_argument("--model", default=env("OBC_MODEL"), help="default $OBC_MODEL")
    parser.add_argument("--press", default="KnormPress", help="Class[:key=value,...]")
    parser.add_argument("--protocol", choices=("agnostic", "aware"), default="agnostic")
    parser.add_argument("--name", help="the score's dataset name (default: the press's class)")
    parser.add_argument("-o", "--output", default=env("OBC_SCORES"), help="default $OBC_SCORES")
    args = parser.parse_args()
    for what, value in (("TRACE", args.trace), ("--model", args.model), ("-o", args.output)):
        if not value:
            parser.error(f"{what} missing (nor given by the environment of eval --score-cmd)")
    try:
        press = make_press(args.press)
    except ImportError as e:
        sys.exit(f"kvpress_bridge: {e} (pip install kvpress)")
    with obcache.Trace(args.trace) as trace:
        n = trace.candidates if args.protocol == "agnostic" else trace.n_prompt
        ids = [int(t) for t in trace.tokens[:n]]
        if len(ids) < n:
            sys.exit(f"kvpress_bridge: {args.trace}: no token ids of the prompt")
        model = load_model(args.model)
        scores = press_scores(model, press, ids, trace.n_layers)
        if scores.shape != (trace.n_layers, trace.n_kv_heads, n):
            sys.exit(f"kvpress_bridge: scores of shape {scores.shape}, expected "
                     f"{(trace.n_layers, trace.n_kv_heads, n)}: not this trace's model?")
        name = args.name or args.press.partition(":")[0]
        obcache.write_scores(args.output, trace, {name: scores})
    print(f"kvpress_bridge: {args.press} scores of {n} positions -> {args.output}")


if __name__ == "__main__":
    main()
