"""Seeded synthetic corpora for benchmarks: fact-bearing documents and questions, no download.

:func:`synthetic_documents` writes ``n`` documents of about ``words`` words.
Each holds a handful of facts about invented people, organisations and
cities (capitalised names, years, relations such as "works at", "was born
in") mixed with neutral filler sentences, so extraction finds entities and
triples at a realistic density. The same ``seed`` gives the same corpus on
every machine and Python version (``random.Random`` with a fixed seed).
:func:`synthetic_qa` adds one question per document with its gold answer and
gold evidence (the document), for retrieval quality (``memlab bench recall``).
:func:`synthetic_conversation` turns such questions into a chat (new questions,
terse follow-ups, guidance statements, thanks, corrections) for the turn-analysis
modes (``memlab bench modes``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CONVERSATION_KINDS", "ConversationTurn", "QACorpus", "QAItem", "synthetic_conversation", "synthetic_documents", "synthetic_qa"]

_FIRST = (
    "Ada Alan Bela Carla Dmitri Elena Farid Greta Hiro Ines Jonas Kira Lars Mina Nadia Omar Petra Quentin Rosa "
    "Sven Tara Umar Vera Wen Xavier Yara Zoltan Amara Bruno Celia Dario Esme Felix Gaia Hugo Iris Jun Kofi Lea"
).split()
_LAST = (
    "Abbott Berger Castillo Dubois Eriksen Fontaine Garcia Hoffmann Ivanova Jensen Kowalski Laurent Moreau "
    "Nakamura Okafor Petrov Quinn Rossi Schmidt Tanaka Ueda Varga Weber Xu Yilmaz Zimmermann Almeida Brandt"
).split()
_CITIES = (
    "Lisbon Oslo Kyoto Nairobi Quito Tallinn Porto Dublin Lyon Turin Krakow Seville Gdansk Bergen Malmo Graz "
    "Leipzig Utrecht Ghent Bilbao Valencia Salzburg Riga Vilnius Tartu Aarhus Tampere Bologna Verona Cork"
).split()
_ORG_HEADS = "Northwind Bluepeak Ironleaf Silverline Redwood Brightwater Stonebridge Clearpath Goldcrest Amberfield".split()
_ORG_TAILS = ("Labs", "Systems", "Institute", "Foundation", "Robotics", "Analytics", "Press", "Energy")
_TOPICS = (
    "marine biology", "compiler design", "urban planning", "medieval history", "protein folding",
    "renewable energy", "glacier dynamics", "language models", "soil chemistry", "bridge engineering",
)
_FACTS = (
    "{person} works at {org} in {city}.",
    "{person} was born in {city} in {year}.",
    "{org} opened an office in {city} in {year}.",
    "{person} met {person2} in {city}.",
    "{person} studies {topic} at {org}.",
    "{person} founded {org} in {year}.",
    "{person} moved to {city} in {year}.",
    "{org} hired {person} as lead of {topic} research.",
)
_FILLER = (
    "The team reviewed the quarterly report and agreed on the next steps.",
    "Several colleagues asked for more time to finish the analysis.",
    "the weather was mild, so the meeting took place outside on the terrace.",
    "Budget questions were postponed until the following week.",
    "A short summary of the discussion was shared with everyone afterwards.",
    "Nobody expected the project to grow so quickly during the first year.",
    "the results were encouraging but needed a larger sample to confirm.",
    "Later that month the group published a short note about the method.",
    "Most of the work happened in small steps, checked carefully at each stage.",
    "There was a long debate about which measurements mattered most.",
)


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _org(rng: random.Random) -> str:
    return f"{rng.choice(_ORG_HEADS)} {rng.choice(_ORG_TAILS)}"


def _fact(rng: random.Random) -> str:
    return rng.choice(_FACTS).format(
        person=_person(rng),
        person2=_person(rng),
        org=_org(rng),
        city=rng.choice(_CITIES),
        year=rng.randint(1950, 2024),
        topic=rng.choice(_TOPICS),
    )


def _sentence_case(sentence: str) -> str:
    return sentence[0].upper() + sentence[1:]


def synthetic_documents(n: int, *, words: int = 300, facts: int = 8, seed: int = 0) -> list[str]:
    """``n`` documents of about ``words`` words, each with ``facts`` fact sentences among filler."""
    if n < 0 or words < 1 or facts < 0:
        raise ValueError(f"need n >= 0, words >= 1, facts >= 0; got n={n}, words={words}, facts={facts}")
    rng = random.Random(seed)
    documents = []
    for _ in range(n):
        sentences = [_fact(rng) for _ in range(facts)]
        count = sum(len(sentence.split()) for sentence in sentences)
        while count < words:
            filler = _sentence_case(rng.choice(_FILLER))
            sentences.insert(rng.randint(0, len(sentences)), filler)
            count += len(filler.split())
        documents.append(" ".join(sentences))
    return documents


_SYLLABLES = "ka lo mi ra ve to sun del mar qu ix bri an ot el zu pha nor ly gen tis cor va".split()
_QA_TEMPLATES = (
    # (fact sentence, question, answer field)
    ("{name} was founded in {city} in {year}.", "Where was {name} founded?", "city"),
    ("{name} was founded in {city} in {year}.", "In which year was {name} founded?", "year"),
    ("The director of {name} is {person}.", "Who is the director of {name}?", "person"),
    ("{name} specialises in {topic}.", "What does {name} specialise in?", "topic"),
)


@dataclass(frozen=True)
class QAItem:
    """One question of a :class:`QACorpus`: its gold ``answer`` and the index of the document holding it."""

    question: str
    answer: str
    document: int


@dataclass(frozen=True)
class QACorpus:
    """Documents and questions with gold evidence (the document index)."""

    documents: list[str]
    questions: list[QAItem]


def _unique_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
        name = f"{word} {rng.choice(_ORG_TAILS)}"
        if name not in taken:
            taken.add(name)
            return name


def synthetic_qa(n: int, *, words: int = 120, seed: int = 0) -> QACorpus:
    """``n`` documents, each about one uniquely named organisation, and one question per document.

    Every document states the organisation's city, founding year, director and
    speciality among filler and facts about other (shared) people and places, so
    a question's gold evidence is exactly one document while its answer words
    also occur elsewhere (distractors).
    """
    if n < 1 or words < 1:
        raise ValueError(f"need n >= 1 and words >= 1; got n={n}, words={words}")
    rng = random.Random(seed)
    taken: set[str] = set()
    documents, questions = [], []
    for index in range(n):
        facts = {
            "name": _unique_name(rng, taken),
            "city": rng.choice(_CITIES),
            "year": str(rng.randint(1950, 2024)),
            "person": _person(rng),
            "topic": rng.choice(_TOPICS),
        }
        sentences = list(dict.fromkeys(template.format(**facts) for template, _, _ in _QA_TEMPLATES))
        sentences += [_fact(rng) for _ in range(2)]
        while sum(len(sentence.split()) for sentence in sentences) < words:
            sentences.insert(rng.randint(1, len(sentences)), _sentence_case(rng.choice(_FILLER)))
        documents.append(" ".join(sentences))
        _, question, field_name = rng.choice(_QA_TEMPLATES)
        questions.append(QAItem(question.format(**facts), facts[field_name], index))
    return QACorpus(documents, questions)


#: weights of the next :func:`synthetic_conversation` turn's kind, after a question or follow-up ("asking")
#: and after anything else ("other": a follow-up needs something to follow)
CONVERSATION_KINDS = {
    "asking": {"question": 0.35, "follow_up": 0.35, "guidance": 0.10, "thanks": 0.10, "correction": 0.10},
    "other": {"question": 0.70, "follow_up": 0.0, "guidance": 0.10, "thanks": 0.10, "correction": 0.10},
}
_CONVERSATION_TEXTS = {
    "follow_up": ("And when?", "Where was that?", "And who runs it?", "When was that?", "And where?", "Who leads it?"),
    "guidance": (
        "Please always answer briefly.",
        "I prefer short answers.",
        "Always mention the year when you know it.",
        "I like answers that name the city.",
        "Never guess when you are unsure.",
    ),
    "thanks": ("Thanks!", "ok", "Thanks, got it.", "Thank you.", "Okay."),
    "correction": ("That's wrong.", "That is incorrect.", "No, that's not right."),
}


@dataclass(frozen=True)
class ConversationTurn:
    """One user message of a synthetic conversation: ``question``, ``follow_up``, ``guidance``, ``thanks`` or ``correction``."""

    kind: str
    text: str


def synthetic_conversation(n: int, questions: Sequence[str], *, seed: int = 0) -> list[ConversationTurn]:
    """``n`` user messages about a remembered corpus, each kind drawn by :data:`CONVERSATION_KINDS` weights.

    New questions come from ``questions`` (e.g. a :class:`QACorpus`' question texts);
    follow-ups are terse ("And when?", "Where was that?") and only follow a question
    or another follow-up; guidance statements ("Please always answer briefly.",
    "I prefer short answers."), thanks ("Thanks!", "ok") and corrections
    ("That's wrong.") complete the mix. The first turn is a question. The same
    ``seed`` gives the same conversation.
    """
    if n < 0 or not questions:
        raise ValueError(f"need n >= 0 and at least one question; got n={n}, {len(questions)} questions")
    rng = random.Random(seed)
    turns: list[ConversationTurn] = []
    for index in range(n):
        if index == 0:
            kind = "question"
        else:
            weights = CONVERSATION_KINDS["asking" if turns[-1].kind in ("question", "follow_up") else "other"]
            kind = rng.choices(list(weights), list(weights.values()))[0]
        text = rng.choice(questions) if kind == "question" else rng.choice(_CONVERSATION_TEXTS[kind])
        turns.append(ConversationTurn(kind, text))
    return turns
