"""The `customization` section: the system prompt every turn gets unless its request
brings its own (LCORE's keys), and the topic summaries of new conversations (ours, each
marked "Ours")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import model_validator

from gateway.config.base import Strict, not_built

# LCORE's `constants.DEFAULT_SYSTEM_PROMPT`: what a turn gets when neither its request
# nor the configuration names a system prompt.
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant"

# LCORE's `constants.DEFAULT_TOPIC_SUMMARY_SYSTEM_PROMPT`, verbatim: the instructions of
# the extra call that titles a new conversation (its `{query}` is not filled in: LCORE
# sends the text as it is, with the question as the call's input).
DEFAULT_TOPIC_SUMMARY_PROMPT = """
Instructions:
- You are a topic summarizer
- Your job is to extract precise topic summary from user input
- Return only the final topic summary, no other text or explanation.

For Input Analysis:
- Scan entire user message
- Identify core subject matter
- Distill essence into concise descriptor
- Prioritize key concepts
- Eliminate extraneous details

For Output Constraints:
- Maximum 5 words
- Capitalize only significant words (e.g., nouns, verbs, adjectives, adverbs).
- Do **NOT** use all uppercase - capitalize only the first letter of significant words
- Exclude articles and prepositions (e.g., "a," "the," "of," "on," "in")
- Exclude all punctuation and interpunction marks (e.g., . , : ; ! ? | "")
- Retain original abbreviations. Do not expand an abbreviation if its specific meaning in the
  context is unknown or ambiguous.
- Neutral objective language
- Do **NOT** provide explanations, reasoning, or "processing steps".
- Do **NOT** provide multiple options (e.g., do not use "or").
- Do **NOT** use introductory text like "The topic is...".


Examples:
- "AI Capabilities Summary" (Correct)
- "Machine Learning Applications" (Correct)
- "AI CAPABILITIES SUMMARY" (Incorrect—should not be fully uppercase)

Processing Steps
1. Analyze semantic structure
2. Identify primary topic
3. Remove contextual noise
4. Condense to essential meaning
5. Generate topic label


Example Input:
How to implement horizontal pod autoscaling in Kubernetes clusters
Example Output:
Kubernetes Horizontal Pod Autoscaling

Example Input:
Comparing OpenShift deployment strategies for microservices architecture
Example Output:
OpenShift Microservices Deployment Strategies

Example Input:
Troubleshooting persistent volume claims in Kubernetes environments
Example Output:
Kubernetes Persistent Volume Troubleshooting

Example Input:
I need a summary about the purpose of RHDH.
Example Output:
RHDH Purpose Summary

Input:
{query}
Output:
"""


class CustomizationConfig(Strict):
    disable_query_system_prompt: bool = False   # a request's own system prompt is a 422
    system_prompt_path: str | None = None        # a file whose text replaces `system_prompt`
    system_prompt: str | None = None             # None: LCORE's default; "": no system prompt at all
    # Ours. False: no turn makes the topic-summary call (a request's
    # `generate_topic_summary` is then ignored).
    topic_summaries: bool = True
    # Ours. The instructions of the topic-summary call (LCORE's, by default).
    topic_summary_prompt: str = DEFAULT_TOPIC_SUMMARY_PROMPT
    profile_path: str | None = not_built()
    disable_shield_ids_override: bool = False   # a request's `shield_ids` is a 422
    agent_card_path: str | None = not_built()
    agent_card_config: dict[str, Any] | None = not_built()

    @model_validator(mode="after")
    def _prompt_from_file(self) -> "CustomizationConfig":
        # As LCORE: the file, read once at start-up, wins over `system_prompt`.
        if self.system_prompt_path is not None:
            try:
                self.system_prompt = Path(self.system_prompt_path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise ValueError(f"system_prompt_path: cannot read {self.system_prompt_path} ({reason})") from None
        return self

    @property
    def default_system_prompt(self) -> str:
        """The system prompt of a turn whose request has none (LCORE's precedence below
        the request's: the configured one, else LCORE's default)."""
        return DEFAULT_SYSTEM_PROMPT if self.system_prompt is None else self.system_prompt
