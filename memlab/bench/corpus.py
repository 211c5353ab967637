"""Seeded synthetic corpora for benchmarks: fact-bearing documents and questions, no download.

:func:`synthetic_documents` writes ``n`` documents of about ``words`` words.
Each holds a handful of facts about invented people, organisations and
cities (capitalised names, years, relations such as "works at", "was born
in") mixed with neutral filler sentences, so extraction finds entities and
triples at a realistic density. The same ``seed`` gives the same corpus on
every machine and Python version (``random.Random`` with a fixed seed).
:func:`synthetic_qa` adds one question per document with its gold answer and
gold evidence (the document), for retrieval quality (``memlab bench recall``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["QACorpus", "QAItem", "synthetic_documents", "synthetic_qa"]

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
