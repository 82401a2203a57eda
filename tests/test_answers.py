"""Reading the option a video-LLM's answer names (zoo.tasks.answers.parse_choice): a table of real-style outputs with
the reading a person gives them.

Regression (issue 20, item 4): before, with numeric options an answer that is an option's text was read as a 0-based
index ("2" scored as the option "3"), the article "a" in free text was read as option A (and with nine or more
options the pronoun "I" as option I), and "answer: d" was not read. The rows marked ``# issue 20`` fail on that code.
"""
import pytest

from zoo.tasks.answers import fallback_choice, parse_choice

COLORS = ['red', 'green', 'blue', 'yellow']
COUNTS = ['1', '2', '3', '4']                      # zoo's counting task, MVBench's action count / object count
NINE = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine']
SHAPES = ['circle', 'square', 'triangle', 'diamond']
ACTIONS = ['Opening a door.', 'Closing a door.', 'Sitting down.', 'Standing up.']   # MVBench style sentences
DURATIONS = ['3 s', '13 s', '30 s', '300 s']

# (model output, options, expected 0-based option or None)
CASES = [
    # a letter alone, as the prompt asks
    ('B', COLORS, 1),
    ('b', COLORS, 1),
    ('(C)', COLORS, 2),
    ('(c)', COLORS, 2),
    ('D.', COLORS, 3),
    ('[A]', COLORS, 0),
    ('  a  ', COLORS, 0),
    ('E', COLORS, None),                           # a letter beyond the options
    ('', COLORS, None),
    # a letter with its option text
    ('B. green', COLORS, 1),
    ('b. green', COLORS, 1),
    ('(C) blue', COLORS, 2),
    ('C) blue', COLORS, 2),
    ('D: yellow', COLORS, 3),
    ('B green', COLORS, 1),
    ('A red', COLORS, 0),
    ('B. blue', COLORS, 1),                        # the letter wins over the text that follows it
    # after a cue
    ('answer: d', COLORS, 3),                      # issue 20
    ('the answer is d.', COLORS, 3),               # issue 20
    ('The answer is B.', COLORS, 1),
    ('Answer: (C)', COLORS, 2),
    ('Answer: B because the ball is green', COLORS, 1),
    ('The correct option is A', COLORS, 0),
    ('Best option: (D) yellow', COLORS, 3),
    ('I think the answer is C.', COLORS, 2),
    ('The answer is A.', NINE, 0),
    # letters in parentheses inside prose
    ('It must be (b) since it moves.', COLORS, 1),
    ('Either (a) or (b).', COLORS, None),          # two different letters: ambiguous
    # the option's text
    ('red', COLORS, 0),
    ('Green.', COLORS, 1),
    ('The answer is blue.', COLORS, 2),
    ('Closing a door', ACTIONS, 1),
    ('closing a door.', ACTIONS, 1),
    ('Standing up.', ACTIONS, 3),
    # numeric options: the option's text, never an index
    ('2', COUNTS, 1),                              # issue 20
    ('4', COUNTS, 3),
    ('1', COUNTS, 0),                              # issue 20
    ('3.', COUNTS, 2),                             # issue 20
    ('Answer: 2', COUNTS, 1),                      # issue 20
    ('(3)', COUNTS, 2),                            # issue 20
    ('There are 3 circles.', COUNTS, 2),           # issue 20
    ('B', COUNTS, 1),
    ('13 s', DURATIONS, 1),
    ('it lasts 13 s', DURATIONS, 1),               # "3 s" is part of "13 s": not a second match
    ('5', COUNTS, None),
    # an index when no option text matches (0-based)
    ('2', COLORS, 2),
    ('0', COLORS, 0),
    ('7', COLORS, None),
    # prose: the article "a" and the pronoun "I" are no letters
    ('a green circle', COLORS, 1),                 # issue 20 (read as "green", not as letter a)
    ('A blue ball rolls past.', COLORS, 2),        # issue 20
    ('I see a yellow square', COLORS, 3),          # issue 20
    ('I think it is the triangle', SHAPES, 2),     # issue 20
    ('I counted seven', NINE, 6),                  # issue 20: with nine options "I" would be option I
    ('I am not sure', NINE, None),                 # issue 20
    ('a', COLORS, 0),                              # a lone "a" is the letter
    ('There is a cat.', COLORS, None),
    ('It is either red or blue.', COLORS, None),   # two options: ambiguous
    ('zebra crossing', COLORS, None),
    ('The circle is red, not green.', COLORS, None),
]


def test_the_table_is_large_enough():
    assert len(CASES) >= 50


@pytest.mark.parametrize('text,options,expected', CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_parse_choice(text, options, expected):
    assert parse_choice(text, options) == expected


def test_fallback_is_seeded_by_item():
    picks = {fallback_choice(0, f'q{i}', 3) for i in range(30)}
    assert picks == {0, 1, 2} and fallback_choice(0, 'q1', 3) == fallback_choice(0, 'q1', 3)
