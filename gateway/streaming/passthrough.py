"""Which upstream events pass through unchanged, and the byte patterns that recognise
them in every SSE dialect without parsing their JSON.

Dialects: Llama Stack writes data lines only with `type` last; OpenAI (and most
OpenAI-compatible servers) write an `event:` line, then a data line with `type` first.
Both are recognised with or without the `event:` line, `type` first or last, other
fields in any order (line ends are normalised to `\\n` before any of this runs).

The patterns read the same facts the slow path reads (`SSEDecoder.decode` and
`Event.payload`), so a block they accept gives identical bytes either way:

- the type: right after the opening brace, or as the last key before the closing one.
  A string value escapes its quotes, so text can never spell `"type":"` there.
- the sequence number: the digits after `"sequence_number":` when the key occurs once
  (a block with two, one of them nested, is parsed: `events._patch_sequence`).
"""

from __future__ import annotations

import re

# Event types no stage changes (the repairer and enricher pass them through).
PASS_THROUGH = frozenset({
    b"response.output_text.delta", b"response.refusal.delta", b"response.reasoning_text.delta",
    b"response.reasoning_summary_text.delta", b"response.content_part.added",
    b"response.output_text.annotation.added",
})
_KINDS = b"|".join(re.escape(kind) for kind in sorted(PASS_THROUGH))

# Cheap tests before any regex, each one C call: how a pass-through block can start
# (an `event:` line naming it, or `type` first) or end (`type` last).
STARTS = tuple([b"event: " + kind + b"\n" for kind in PASS_THROUGH]
               + [b'data: {"type":"' + kind + b'",' for kind in PASS_THROUGH])
ENDS = tuple(b',"type":"' + kind + b'"}' for kind in PASS_THROUGH)

# The same endings with the blank line: a read that is one type-last event ends so.
LAST_ENDS = tuple(end + b"\n\n" for end in ENDS)

# One block and its blank line, as (head, kind, tail) for `type` first and (head,
# tail, kind) for `type` last: `head` ends with the sequence number's key, `tail` starts
# after its digits. The caller checks that neither holds the key again. (Capturing the
# key inside `head` keeps sre's fast path for `[^\n]*` followed by a literal; a group
# boundary or an atomic group between them doubles the regex's cost. Named groups cost
# a caught exception each in 3.11.)
_EVENT_LINE = rb'(?:event: [^\n]*\n)?data: '
TYPE_FIRST = re.compile(_EVENT_LINE + rb'(\{"type":"(' + _KINDS + rb')",[^\n]*"sequence_number":)\d++([^\n]*)\n\n')
TYPE_LAST = re.compile(_EVENT_LINE + rb'(\{(?!"type":")[^\n]*"sequence_number":)\d++([^\n]*?,"type":"('
                       + _KINDS + rb')"\})\n\n')
SEQUENCE_KEY = b'"sequence_number":'

# A run of blocks of one pass-through kind (blank lines included), in one dialect: the
# kind is read from the first block and every later block must repeat it. The numbers
# are checked separately (`SEQUENCE`); here only the shape.
_PAYLOAD = rb'\{(?:"type":"\1",[^\n]*|(?!"type":")[^\n]*,"type":"\1")\}\n\n'
EVENT_RUN = re.compile(rb'event: (' + _KINDS + rb')\ndata: ' + _PAYLOAD + rb'(?:event: \1\ndata: ' + _PAYLOAD + rb')*')
FIRST_RUN = re.compile(rb'data: \{"type":"(' + _KINDS + rb')",[^\n]*\}\n\n(?:data: \{"type":"\1",[^\n]*\}\n\n)*')
LAST_RUN = re.compile(rb'data: \{(?!"type":")[^\n]*,"type":"(' + _KINDS + rb')"\}\n\n'
                      rb'(?:data: \{(?!"type":")[^\n]*,"type":"\1"\}\n\n)*')
# Every sequence number of a run, in order; a block with two keys, or a key without
# digits, makes the list longer or breaks its equality with the expected numbers.
SEQUENCE = re.compile(rb'"sequence_number":(\d*)')
DIGITS = b"%d".__mod__
