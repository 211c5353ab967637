"""The seeded synthetic conversational-memory benchmark (:func:`memlab.bench.conversations.synthetic`).

Everything the generator says lives in the tables below, as data: one entry per fact
*slot* (what the user tells the assistant, how a question asks for it, and decoy lines
that share the question's words without answering it). Statement and question
wordings of a slot are written to share as few content words as possible (synonyms,
reordering: "I adopted a beagle named Biscuit" / "What did I name my dog?"), while the
decoys reuse the question's words ("My neighbour's dog is called Pepper"), so word
overlap alone points a retriever at the wrong turn.

Each slot carries a *topic*; a conversation never uses two slots of one topic, so no
two of its questions can interfere (a dog's name and a count of pets, say).

Layout of one conversation: 12-20 dated sessions, 1-9 days apart, whose gold evidence
is confined to a random pool of fewer than half of them (the rest are distractor
sessions: small talk, questions to the assistant, decoys). Evidence is always a user
turn, answered by a neutral acknowledgement that repeats nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from memlab.bench._conversation_model import (
    CATEGORIES,
    Benchmark,
    Conversation,
    Question,
    Role,
    Session,
    Turn,
)
from memlab.exceptions import ValidationError
from memlab.text import I_DONT_KNOW

__all__ = ["ABSTENTION_ANSWER", "DEFAULT_SIZE", "category_counts", "conversation_plan", "generate"]

#: questions at ``size="default"`` (an equal share per category)
DEFAULT_SIZE = 600
#: the gold answer of every abstention question
ABSTENTION_ANSWER = I_DONT_KNOW

_SESSIONS = (12, 20)  # sessions per conversation, inclusive
_GAP_DAYS = (1, 9)  # days between consecutive sessions, inclusive
_SMALL_TALK = (2, 4)  # filler exchanges per session, inclusive

# -- value pools -------------------------------------------------------------------------------

_NAMES = (
    "Amara Bruno Celia Dario Esme Felix Gaia Hugo Iris Jonas Kira Lars Mina Nadia Omar Petra Rosa Sven Tara Vera "
    "Wen Yara Zoltan Ines Farid Greta Hiro Elena Kofi Lea"
).split()
_PET_NAMES = "Biscuit Pepper Maple Rocket Juniper Waffles Pickle Nugget Clover Bramble Pretzel Sprout".split()
_TOWNS = "Tartu Bergen Graz Ghent Cork Bilbao Porto Tampere Aarhus Salzburg Verona Gdansk".split()
_COMPANIES = (
    "Northwind Labs", "Bluepeak Systems", "Ironleaf Analytics", "Silverline Press", "Redwood Robotics",
    "Brightwater Energy", "Stonebridge Foundation", "Clearpath Institute", "Goldcrest Media", "Amberfield Foods",
)
_COUNTRIES = "Portugal Japan Morocco Iceland Peru Vietnam Greece Norway Chile Kenya".split()
_BANDS = ("the Velvet Owls", "Paper Lanterns", "Grey Harbour", "the Midnight Ferns", "Copper Tide", "Northern Static")
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class _Topical(Protocol):
    @property
    def topic(self) -> str: ...


_S = TypeVar("_S", bound=_Topical)


# -- single_session_fact ---------------------------------------------------------------------


@dataclass(frozen=True)
class _FactSlot:
    """One fact stated once. ``{v}`` is the value; in a decoy ``{o}`` is another value of the pool."""

    topic: str
    values: Sequence[str]
    statements: Sequence[str]
    questions: Sequence[str]
    decoys: Sequence[str]
    answer: str = "{v}"


_FACT_SLOTS: tuple[_FactSlot, ...] = (
    _FactSlot(
        "pets", _PET_NAMES,
        ("I adopted a beagle named {v} last spring.", "We finally brought home a rescue terrier, and we're calling him {v}.",
         "{v}, our new spaniel puppy, chewed through my slippers again."),
        ("What is the name of my dog?", "What did I name my dog?", "Remind me, what is my dog called?"),
        ("My neighbour's dog is called {o} and it barks all night.", "Apparently the most popular dog name this year is {o}.",
         "Do you think a dog learns a short name faster?"),
    ),
    _FactSlot(
        "hometown", _TOWNS,
        ("I was raised in {v}, right by the harbour.", "Childhood in {v} meant rainy summers and long bike rides."),
        ("Which town did I grow up in?", "Where is my hometown?"),
        ("My colleague grew up in {o} and still visits every summer.", "Small towns feel so quiet compared to where I grew up.",
         "Is it normal to feel homesick for a hometown you left years ago?"),
    ),
    _FactSlot(
        "job", ("pharmacist", "architect", "paramedic", "translator", "veterinarian", "carpenter", "librarian", "pastry chef"),
        ("I've spent six years as a {v}, and the night shifts are brutal.", "Being a {v} means I'm on my feet most of the day."),
        ("What do I do for a living?", "What is my profession?", "What kind of work do I do?"),
        ("My brother is a {o} and honestly loves it.", "Work has been hectic this month.",
         "What kind of profession suits a night owl, do you think?"),
    ),
    _FactSlot(
        "sibling", _NAMES,
        ("My younger sister {v} just started college.", "{v}, my little sister, is visiting this weekend."),
        ("What is my sibling called?", "What's my sibling's first name?"),
        ("My friend's sibling {o} is moving abroad.", "I never know what to buy a sibling for a birthday.",
         "Is it common for siblings to grow closer after their twenties?"),
    ),
    _FactSlot(
        "music", ("cello", "ukulele", "clarinet", "banjo", "harp", "trumpet", "accordion", "saxophone"),
        ("I've been taking {v} lessons every Tuesday evening.", "Practised {v} scales for an hour before dinner."),
        ("Which musical instrument am I learning?", "What am I learning to play?"),
        ("My nephew is learning to play the {o} and it is loud.", "Is it too late to pick up a musical instrument at my age?"),
    ),
    _FactSlot(
        "health", ("shellfish", "peanuts", "sesame", "kiwi", "mustard", "celery"),
        ("I can't touch {v}, I break out in hives within minutes.", "One bite of {v} and my throat swells up, so I check every label."),
        ("What food am I allergic to?", "Which ingredient gives me a bad reaction?"),
        ("My coworker is allergic to {o}, so we always order separately.", "Food allergies seem far more common than they used to be.",
         "What is the difference between an intolerance and a reaction?"),
    ),
    _FactSlot(
        "vehicle", ("Volvo estate", "Subaru Outback", "Mini Cooper", "Toyota Prius", "Skoda Octavia", "Mazda MX-5", "Fiat Panda"),
        ("Last month I finally bought a second-hand {v}.", "My {v} needs new tyres before winter."),
        ("What vehicle do I drive?", "Which car do I own?"),
        ("My dad keeps telling me to buy a {o} because they never break down.", "Which car is best for a family of four, in general?",
         "Electric vehicles are getting cheaper, aren't they?"),
    ),
    _FactSlot(
        "employer", _COMPANIES,
        ("I started at {v} in the spring and the team is lovely.", "The people at {v} threw me a welcome lunch last week."),
        ("Which company employs me?", "Who is my employer?"),
        ("My friend just got an offer from {o}.", "Which company has the best parental leave, do you know?",
         "Is it rude to ask an employer about remote days in an interview?"),
    ),
    _FactSlot(
        "education", ("geology", "marine biology", "philosophy", "economics", "linguistics", "chemistry", "art history"),
        ("I majored in {v} back in college, which nobody ever guesses.", "My {v} degree took five years because I switched halfway."),
        ("What did I study at university?", "What was my field of study?"),
        ("My roommate at university studied {o}.", "Does a field of study really matter for a career?"),
    ),
    _FactSlot(
        "birthday", ("3 March", "17 June", "9 October", "28 January", "14 August", "22 November"),
        ("My birthday is on {v}, so I'm planning a picnic.", "Every {v} I take time off to celebrate getting older."),
        ("What is my date of birth?", "On what day was I born?"),
        ("My mum was born on {o}, the same day as a famous singer.", "Do you know what day of the week I should plan a party on?"),
    ),
    _FactSlot(
        "language", ("Portuguese", "Japanese", "Korean", "Italian", "Dutch", "Turkish", "Polish", "Swahili"),
        ("I've been practising my {v} with an app every morning.", "My {v} tutor says my pronunciation is getting better."),
        ("Which foreign tongue am I studying?", "What language am I trying to pick up?"),
        ("My cousin speaks fluent {o}.", "Is learning a language after thirty much harder?"),
    ),
    _FactSlot(
        "plants", ("orchid", "fig tree", "monstera", "bonsai", "lavender", "peace lily"),
        ("My {v} on the balcony finally put out new leaves.", "I repotted the {v} this morning and got soil everywhere."),
        ("What houseplant do I take care of?", "Which greenery do I keep at home?"),
        ("My aunt's garden is full of {o}.", "Are houseplants really supposed to clean the air at home?"),
    ),
    _FactSlot(
        "coffee", ("oat flat white", "double espresso", "iced americano", "cortado", "chai latte", "mocha"),
        ("Every morning I pick up a {v} from the kiosk by the station.", "The barista starts on my {v} as soon as I walk in."),
        ("What drink do I usually buy before work?", "What's my usual café order?"),
        ("My manager drinks a {o}, which seems wild to me.", "Work mornings are rough, what drink helps you wake up?"),
    ),
    _FactSlot(
        "home", ("third", "fifth", "seventh", "ninth", "eleventh"),
        ("We live on the {v} floor and the lift is always broken.", "Carrying groceries up to the {v} floor is my daily workout."),
        ("How high up is my flat?", "Which storey is my apartment on?"),
        ("My friend's flat is on the {o} floor with a huge view.", "Is it safer to rent an apartment high up?"),
        answer="the {v} floor",
    ),
    _FactSlot(
        "family", _NAMES,
        ("My husband {v} surprised me with dinner last night.", "{v}, my wife, is away on a work trip until Friday."),
        ("What's my spouse's name?", "Who am I married to?"),
        ("My best friend's husband {o} is a chef.", "What's a good name for a wedding anniversary playlist?"),
    ),
    _FactSlot(
        "commute", ("25", "35", "40", "50", "55"),
        ("It takes me about {v} minutes on the tram to reach the office.", "The tram ride into the office is roughly {v} minutes door to door."),
        ("How long is my journey to work?", "What is my daily travel time to my job?"),
        ("My sister's journey to work is {o} minutes by bus.", "How long is too long for a daily journey, would you say?"),
        answer="{v} minutes",
    ),
)


# -- multi_session_aggregation ---------------------------------------------------------------


@dataclass(frozen=True)
class _SumSlot:
    """Amounts stated in 2-3 sessions; the question asks their total (``count_only``: the number of statements)."""

    topic: str
    statements: Sequence[str]  # {n}: the amount (as spelled by ``spell``), {x}: a context value from ``contexts``
    questions: Sequence[str]
    answer: str  # {total}
    amounts: tuple[int, int, int]  # range(start, stop, step) of one statement's amount
    decoys: Sequence[str]
    contexts: Sequence[str] = ()
    words: bool = False  # spell amounts as words ("three")
    count_only: bool = False


_SUM_SLOTS: tuple[_SumSlot, ...] = (
    _SumSlot(
        "books",
        ("I devoured {n} thrillers on the flight to {x}.", "Over the long weekend I got through {n} paperbacks.",
         "Finished {n} novels for my reading circle this month."),
        ("How many books have I read in total?", "What number of books have I gotten through altogether?"),
        "{total}", (2, 5, 1),
        ("My sister read twelve books on her holiday.", "How many books does the average person read a year?"),
        contexts=_TOWNS, words=True,
    ),
    _SumSlot(
        "charity",
        ("I gave ${n} to the animal shelter fundraiser.", "Sent ${n} to the flood relief appeal yesterday.",
         "Dropped ${n} in the bucket at the hospice fun run."),
        ("How much money have I donated overall?", "What is the total I've given away to good causes?"),
        "${total}", (10, 105, 5),
        ("My company matches money donated by employees, up to a limit.", "Which good causes make the most of a small donation?"),
    ),
    _SumSlot(
        "hiking",
        ("We hiked {n} miles along the ridge on Saturday.", "Did a {n} mile loop around the reservoir with my brother.",
         "Trekked {n} miles through the forest to the waterfall."),
        ("How far have I walked on trails altogether?", "What total distance have I covered on foot in the hills?"),
        "{total} miles", (3, 15, 1),
        ("My friend walked the whole coastal trail last year.", "How far is a sensible distance for a beginner to walk?"),
    ),
    _SumSlot(
        "plants",
        ("I picked up {n} succulents at the market.", "The garden centre had a sale so I came home with {n} ferns.",
         "A neighbour was moving and handed me {n} potted cacti."),
        ("How many houseplants have I acquired?", "What is the number of new houseplants I've got?"),
        "{total}", (2, 6, 1),
        ("My aunt owns more houseplants than furniture.", "How many houseplants can a small flat handle?"),
        words=True,
    ),
    _SumSlot(
        "baking",
        ("I baked {n} loaves of sourdough for the neighbours.", "Whipped up {n} banana breads for the school fair.",
         "Turned out {n} batches of cinnamon rolls for the office."),
        ("How many bakes have I produced in total?", "What is the overall count of things I've made in my oven?"),
        "{total}", (2, 6, 1),
        ("My grandmother made bread every single day.", "What is a good first thing to make in a new oven?"),
        words=True,
    ),
    _SumSlot(
        "fitness",
        ("I went to {n} spin classes this week.", "Squeezed in {n} cycling sessions at the gym before the holiday.",
         "Managed {n} early-morning indoor rides this fortnight."),
        ("How many bike workouts have I done in total?", "What is the count of my stationary bike workouts?"),
        "{total}", (2, 6, 1),
        ("My trainer says three bike workouts a week is plenty.", "Are indoor bike workouts as good as riding outside?"),
        words=True,
    ),
    _SumSlot(
        "concerts",
        ("The tickets for {x} cost me ${n}.", "I paid ${n} to see {x} at the arena.", "Splurged ${n} on a festival day pass to catch {x}."),
        ("How much have I spent on live music in total?", "What is my overall spending on gigs?"),
        "${total}", (25, 125, 5),
        ("My friend spends a fortune on live music every summer.", "Why are gig prices so high these days?"),
        contexts=_BANDS,
    ),
    _SumSlot(
        "travel",
        ("Just got back from a week in {x}!", "Spent ten days wandering around {x}, what a place.", "We flew home from {x} last night."),
        ("How many different countries have I traveled to recently?", "What number of nations have I visited lately?"),
        "{total}", (1, 2, 1),
        ("My parents have traveled to thirty countries.", "Which countries are easiest to visit without a visa?"),
        contexts=_COUNTRIES, count_only=True,
    ),
    _SumSlot(
        "overtime",
        ("I put in {n} extra hours at the office on Tuesday.", "Stayed {n} hours late to finish the audit.",
         "Logged {n} hours on Saturday to meet the deadline."),
        ("How much overtime have I worked in total?", "What is my overall amount of overtime?"),
        "{total} hours", (2, 6, 1),
        ("My colleague never works overtime and still gets everything done.", "Is overtime usually paid at a higher rate?"),
    ),
)


# -- knowledge_update ------------------------------------------------------------------------


def _pool(values: Sequence[str]) -> Callable[[random.Random], tuple[str, str]]:
    def draw(rng: random.Random) -> tuple[str, str]:
        old, new = rng.sample(list(values), 2)
        return old, new

    return draw


def _faster(rng: random.Random) -> tuple[str, str]:
    old = rng.randint(22 * 60, 32 * 60)
    new = old - rng.randint(40, 180)
    return f"{old // 60}:{old % 60:02d}", f"{new // 60}:{new % 60:02d}"


def _dearer(rng: random.Random) -> tuple[str, str]:
    old = rng.randrange(800, 1600, 25)
    return str(old), str(old + rng.randrange(50, 250, 25))


def _more(rng: random.Random) -> tuple[str, str]:
    old = rng.randint(2, 3)
    return str(old), str(old + rng.randint(1, 2))


@dataclass(frozen=True)
class _UpdateSlot:
    """A value stated (``old``), then replaced in a later session (``new``); the latest wins."""

    topic: str
    values: Callable[[random.Random], tuple[str, str]]
    old: Sequence[str]
    new: Sequence[str]
    questions: Sequence[str]
    decoys: Sequence[str]
    answer: str = "{v}"


_UPDATE_SLOTS: tuple[_UpdateSlot, ...] = (
    _UpdateSlot(
        "home", _pool(("Elm Street", "Harbour Lane", "Mill Road", "Station Avenue", "Castle Terrace", "Orchard Way")),
        ("I moved into a flat on {v} this month.", "Our place on {v} has a tiny garden, which I love."),
        ("We relocated again, we're settled on {v} now.", "Unpacked the last boxes at the new place on {v}."),
        ("Where do I currently reside?", "What is my address these days?"),
        ("My cousin lives in a gorgeous house near the river.", "Where do most people reside when they first move to a city?"),
    ),
    _UpdateSlot(
        "employer", _pool(_COMPANIES),
        ("I work at {v}, mostly on the billing team.", "Another long week at {v}, but the project is going well."),
        ("I handed in my notice and joined {v} on Monday.", "First week at {v} done, the new team is great."),
        ("Who is my present employer?", "Which company am I with these days?"),
        ("My friend's employer just announced layoffs.", "Which company would you say treats staff best?"),
    ),
    _UpdateSlot(
        "running", _faster,
        ("My best 5k is {v}, and I'm trying to beat it.", "Parkrun this morning, still stuck on my {v} personal record."),
        ("Smashed my record at parkrun, {v}!", "New personal best over 5k today, {v}, can you believe it?"),
        ("What is my fastest time for five kilometres?", "How quickly can I cover five kilometres now?"),
        ("My running club's fastest member does five kilometres in seventeen minutes.", "What is a good time for a beginner over five kilometres?"),
    ),
    _UpdateSlot(
        "pets", _more,
        ("We have {v} cats at the moment, and they rule the house.", "Feeding our {v} cats takes a whole tin every morning."),
        ("We adopted another kitten, so the cat count is {v} now.", "With the new arrival there are {v} cats sharing the sofa."),
        ("How many pets do I own?", "What is the size of my animal household?"),
        ("My neighbour owns four pets and a tortoise.", "How many pets are too many for a flat?"),
    ),
    _UpdateSlot(
        "phone", _pool(("Pixel 6", "iPhone 12", "Galaxy S21", "Fairphone 4", "Nokia X20", "Moto G9")),
        ("I'm still using my old {v}, the battery is dying.", "My {v} fell in the sink again, somehow it survived."),
        ("Finally switched to a {v}, the camera is amazing.", "Set up my new {v} last night and moved all my photos."),
        ("Which mobile do I currently carry?", "What handset am I using these days?"),
        ("My mum refuses to replace her mobile from 2015.", "Which mobile has the best camera right now?"),
    ),
    _UpdateSlot(
        "fitness", _pool(_WEEKDAYS),
        ("I do yoga every {v} evening at the studio.", "{v} yoga is the highlight of my week."),
        ("The studio moved my yoga class to {v} evenings.", "My yoga is on {v} now because of the new timetable."),
        ("Which day is my stretching session now?", "On which day of the week do I have my mat practice at present?"),
        ("My friend does a stretching session every morning.", "What day of the week is best for a rest day?"),
    ),
    _UpdateSlot(
        "housing", _dearer,
        ("Our rent is ${v} a month, which is fine for the area.", "Paid the landlord ${v} again, same as every month."),
        ("The landlord raised it, so we now pay ${v} a month.", "Rent went up, it's ${v} from this month onwards."),
        ("How much is my housing bill these days?", "What do I pay for accommodation now?"),
        ("My friend's housing costs doubled when she moved.", "Is it normal to spend a third of income on accommodation?"),
        answer="${v} a month",
    ),
    _UpdateSlot(
        "manager", _pool(_NAMES),
        ("My manager {v} is super supportive.", "Had my review with {v}, my manager, and it went well."),
        ("After the reorg {v} took over as my boss.", "{v} is running our team now that the reshuffle is done."),
        ("Who do I report to now?", "Who supervises me at present?"),
        ("My brother says his boss never replies to messages.", "How do I tell a new supervisor I need more support?"),
    ),
    _UpdateSlot(
        "commute", _pool(("bike", "bus", "train", "tram", "scooter", "car share")),
        ("I get to the office by {v} most days.", "Taking the {v} in this morning was painless."),
        ("I've switched to going in by {v} instead.", "These days it's the {v} for me, much less stressful."),
        ("How do I travel to my workplace nowadays?", "What is my current way of getting to my job?"),
        ("My colleague's way of getting to the workplace involves two ferries.", "What is the greenest way to travel each day?"),
    ),
)


# -- temporal --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Event:
    """Something that happens on the day of its session (``statement`` says "today")."""

    topic: str
    statement: str
    past: str  # "had my teeth fixed": completes "On what date did I ...?"
    gerund: str  # "having my teeth fixed": the ordering questions and answers
    decoy: str


_EVENTS: tuple[_Event, ...] = (
    _Event("health", "Just got out of the dentist, two fillings, ouch.", "have my teeth fixed", "having my teeth fixed",
           "My sister has her teeth fixed next week, poor thing."),
    _Event("running", "Ran my first 10k race this morning and didn't stop once!", "complete a ten kilometre run",
           "completing a ten kilometre run", "My coworker wants to complete a ten kilometre run someday."),
    _Event("home", "We signed the lease on the new flat today.", "commit to renting the new apartment",
           "committing to renting the new apartment", "Renting an apartment in this city takes forever."),
    _Event("glasses", "Picked up my new glasses from the optician this afternoon.", "collect my spectacles",
           "collecting my spectacles", "My dad keeps losing his spectacles."),
    _Event("vehicle", "Had my driving test today and passed!", "earn my licence", "earning my licence",
           "My cousin is still trying to earn a licence."),
    _Event("family", "My parents flew in from abroad this morning.", "welcome my mother and father for their visit",
           "welcoming my mother and father", "My friend's mother and father visit every Christmas."),
    _Event("garden", "Got the keys to our allotment plot today.", "receive access to the community garden",
           "receiving access to the community garden", "The community garden has a long waiting list."),
    _Event("education", "Finally submitted my thesis this morning.", "hand in my dissertation", "handing in my dissertation",
           "My flatmate hands in a dissertation next year."),
    _Event("crafts", "I started my pottery course tonight.", "begin the ceramics class", "beginning the ceramics class",
           "My aunt says a ceramics class changed her life."),
    _Event("furniture", "Our sofa was finally delivered this afternoon.", "get the new couch", "getting the new couch",
           "My neighbour's new couch would not fit through the door."),
    _Event("vaccine", "I got my flu jab at the pharmacy today.", "get vaccinated", "getting vaccinated",
           "Do you know when people should get vaccinated each winter?"),
    _Event("travel", "Booked the tickets for our trip to Kyoto today.", "reserve travel to Japan", "reserving travel to Japan",
           "Travel to Japan is supposed to be lovely in autumn."),
)

_WHEN = ("On what date did I {past}?", "When did I {past}?")
_ORDER = ("Which happened first: {a}, or {b}?", "What came earlier, {a} or {b}?")
_GAP = ("How many days passed between {a} and {b}?", "How long was it, in days, from {a} to {b}?")


# -- preference ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PreferenceSlot:
    """A stated taste; the question asks for a recommendation that should honour it."""

    topic: str
    values: Sequence[str]
    statements: Sequence[str]
    questions: Sequence[str]
    answer: str
    decoys: Sequence[str]


_PREFERENCE_SLOTS: tuple[_PreferenceSlot, ...] = (
    _PreferenceSlot(
        "cooking", ("Thai", "Ethiopian", "Sichuan", "Mexican", "Lebanese", "Keralan"),
        ("I've been vegetarian for years and I'm obsessed with {v} cooking.", "Nothing beats meat-free {v} food with plenty of heat."),
        ("Any ideas for what I could make for dinner this weekend?", "What should I prepare for supper on Saturday?"),
        "Suggest spicy vegetarian {v} dishes.",
        ("My roommate makes dinner from a meal kit every weekend.", "What is a quick supper idea for a busy night?"),
    ),
    _PreferenceSlot(
        "travel", ("mountain cabin", "lakeside hut", "forest lodge", "island cottage"),
        ("Crowded beaches are my nightmare, give me a {v} and quiet trails any day.",
         "My ideal break is a remote {v} with nobody around and hiking from the door."),
        ("Where should I go for my next vacation?", "Can you recommend a destination for my holiday next month?"),
        "Recommend a quiet {v} getaway with hiking, away from crowds.",
        ("My boss just came back from a vacation in a huge resort.", "Which destination is cheapest next month?"),
    ),
    _PreferenceSlot(
        "books", ("hard science fiction", "historical mysteries", "Nordic noir", "narrative nonfiction"),
        ("I only enjoy {v}, anything with dragons bores me.", "Give me {v} over fantasy every time."),
        ("Could you recommend something for my next read?", "What should I pick up at the library?"),
        "Recommend {v}, not fantasy.",
        ("My book club's next read is a thousand pages long.", "What should I read to get better at writing?"),
    ),
    _PreferenceSlot(
        "music", ("jazz piano trios", "ambient electronica", "baroque harpsichord", "lo-fi hip hop"),
        ("Nothing helps me focus like {v}.", "When I need to get stuff done I put {v} on repeat."),
        ("What should I play in the background while I concentrate?", "Any suggestions for something to listen to at my desk?"),
        "Suggest {v}.",
        ("My colleague can only concentrate with silence.", "Does music in the background actually help people?"),
    ),
    _PreferenceSlot(
        "running", ("swimming", "rowing", "cycling", "pilates"),
        ("My knees can't handle running anymore, but I love {v}.", "After the knee surgery, {v} is the only sport that feels good."),
        ("What workout routine would suit me?", "Can you design an exercise plan for me?"),
        "Suggest a low-impact {v} routine rather than running.",
        ("My gym offers a free exercise plan for new members.", "What workout routine burns the most calories?"),
    ),
    _PreferenceSlot(
        "films", ("Korean", "Scandinavian", "French", "Japanese"),
        ("I'm hooked on slow-burn {v} thrillers lately.", "Those moody {v} crime thrillers are my favourite genre."),
        ("What film should I watch tonight?", "Can you suggest a movie for this evening?"),
        "Recommend a slow-burn {v} thriller.",
        ("My brother watched a terrible film tonight and loved it.", "Which movie won the most awards last year?"),
    ),
    _PreferenceSlot(
        "gifts", ("vintage maps", "handmade ceramics", "vinyl records", "fountain pens"),
        ("My partner collects {v}, the stranger the better.", "Nothing makes my partner happier than adding to the {v} collection."),
        ("What present should I get for our anniversary?", "Any gift ideas for the person I live with?"),
        "Suggest {v} for the partner's collection.",
        ("My friend bought a terrible anniversary present last year.", "What is a good gift for a coworker who has everything?"),
    ),
    _PreferenceSlot(
        "weekend", ("birdwatching", "rock climbing", "kayaking", "foraging"),
        ("I'm happiest {v} outdoors, away from screens.", "Any free day I get, I spend it {v}."),
        ("What should I do this Saturday?", "Any plans you'd suggest for my day off?"),
        "Suggest an outdoor day of {v}.",
        ("My neighbours spend every Saturday at the shopping centre.", "What should a family do on a rainy day off?"),
    ),
)


# -- abstention ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unasked:
    """A question about something the conversation never states, and decoys sharing its words."""

    topic: str
    question: str
    decoys: Sequence[str]


_UNSTATED: tuple[_Unasked, ...] = (
    _Unasked("boat", "What is the name of my boat?", ("My uncle finally sold his sailing boat.", "Boat names are always puns, aren't they?")),
    _Unasked("family", "Which university did my father attend?", ("My father loves telling stories about the old days.",
                                                                  "Is university cheaper now than it used to be?")),
    _Unasked("health", "What is my blood type?", ("The clinic asked people to donate blood next month.",)),
    _Unasked("education", "What was the name of my first teacher?", ("Teachers deserve much better pay, honestly.",)),
    _Unasked("body", "How tall am I?", ("My nephew is getting so tall.", "Do tall people really sleep worse?")),
    _Unasked("tattoo", "Which tattoo did I get last year?", ("My friend got a tattoo of a fox last year.",)),
    _Unasked("family", "What is my grandmother's maiden name?", ("My friend's grandmother turns ninety in June.",)),
    _Unasked("coaching", "Which team do I coach on weekends?", ("Coaching a kids team on weekends looks exhausting.",)),
    _Unasked("home", "What colour is my front door?", ("Our neighbours painted their front door bright yellow.",)),
    _Unasked("pets", "What is the name of my cat?", ("My sister's cat sleeps all day.", "Cats ignore their own name, don't they?")),
    _Unasked("jewellery", "How much did I pay for my wedding ring?", ("Jewellery shops make me nervous.",)),
    _Unasked("concerts", "Which band did I see at my first concert?", ("My cousin saw the same band at every concert for a year.",)),
)


# -- distractors -----------------------------------------------------------------------------

_SMALL_TALK_USER = (
    "Morning! The weather is finally turning, isn't it?",
    "Can you explain how compound interest works?",
    "What's a good way to keep herbs fresh in the fridge?",
    "I watched a documentary about octopuses last night, fascinating creatures.",
    "Any tips for writing a polite complaint email?",
    "Could you summarise the plot of Hamlet in two sentences?",
    "How do I get candle wax off a tablecloth?",
    "The news has been so gloomy this week.",
    "What's the difference between a latte and a macchiato?",
    "Help me think of a name for our pub quiz team.",
    "Is it better to stretch before or after exercise?",
    "Why do onions make you cry?",
    "My colleague Omar just got back from a conference in Lisbon.",
    "Our street is having a bake sale for the library.",
    "Can you translate 'good luck' into Spanish?",
    "What year did the first moon landing happen?",
    "Remind me how many ounces are in a pound?",
    "I keep forgetting to water the neighbour's garden while they're away.",
    "Traffic was awful today, there was a marathon in town.",
    "What's an easy card game for four people?",
    "How long should I boil an egg for a runny yolk?",
    "Is it true that goldfish have a three-second memory?",
    "Give me a fun fact about Saturn.",
    "My friend Petra is thinking of learning to surf.",
)
_ANSWERS = (  # the assistant's reply to a user question that is not evidence
    "Good question! Here is a short explanation.",
    "Happy to help with that.",
    "Sure, here are a few ideas.",
    "Here is a quick summary.",
    "That's a common question, and the short answer is: it depends.",
)
_REACTIONS = (  # ... and to a user remark that is not evidence
    "That sounds interesting, tell me more.",
    "Got it. Anything else on your mind?",
    "Thanks for sharing!",
    "Ha, I know the feeling.",
)
_ACKNOWLEDGEMENTS = (
    "Thanks for telling me, I'll keep that in mind.",
    "Noted! Let me know if there's anything I can help with.",
    "That's lovely to hear.",
    "Oh wow, thanks for the update.",
    "Understood. Is there anything you need from me?",
    "How exciting!",
)


# -- assembly --------------------------------------------------------------------------------


@dataclass
class _Draft:
    """A question before its evidence turn ids are known."""

    category: str
    question: str
    answer: str
    abstention: bool = False
    evidence: list[int] = field(default_factory=list)  # session indices, chronological
    paraphrase: bool = True  # worded apart from the evidence (the synthetic benchmark's every question)


def category_counts(size: int) -> dict[str, int]:
    """Questions per category for ``size`` questions: an equal share, the first ``size % 6`` categories one more."""
    base, extra = divmod(size, len(CATEGORIES))
    return {category: base + (1 if index < extra else 0) for index, category in enumerate(CATEGORIES)}


def _resolve_size(size: int | str) -> int:
    if size == "default":
        return DEFAULT_SIZE
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValidationError(f"size must be 'default' or a positive number of questions, got {size!r}")
    return size


def _other(rng: random.Random, values: Sequence[str], value: str) -> str:
    return rng.choice([candidate for candidate in values if candidate != value])


class _Builder:
    """Builds one conversation: picks slots with distinct topics, places statements, then turns.

    A subclass (another benchmark's generator, :mod:`memlab.bench._overlap`) sets
    ``prefix`` and overrides the per-category methods and :meth:`_exchange`.
    """

    prefix = "syn"

    def __init__(self, rng: random.Random, index: int, categories: Sequence[str]) -> None:
        self.rng = rng
        self.conversation_id = f"{self.prefix}-{index:04d}"
        self.categories = categories
        self.topics: set[str] = set()
        count = rng.randint(*_SESSIONS)
        self.plans: list[list[tuple[str, int | None]]] = [[] for _ in range(count)]  # user lines: (text, question)
        self.pool = sorted(rng.sample(range(count), (count - 1) // 2))  # evidence sessions: fewer than half
        self.decoys: list[str] = []
        self.drafts: list[_Draft] = []
        start = datetime(2023, 1, 2) + timedelta(days=rng.randint(0, 364))
        self.dates: list[datetime] = []
        moment = start
        for _ in range(count):
            moment = moment.replace(hour=rng.randint(8, 21), minute=rng.choice((0, 15, 30, 45)))
            self.dates.append(moment)
            moment = moment + timedelta(days=rng.randint(*_GAP_DAYS))

    def _pick(self, slots: Sequence[_S]) -> _S:
        slot = self.rng.choice([slot for slot in slots if slot.topic not in self.topics])
        self.topics.add(slot.topic)
        return slot

    def _state(self, session: int, text: str, question: int) -> None:
        self.plans[session].append((text, question))

    def _evidence_sessions(self, k: int) -> list[int]:
        return sorted(self.rng.sample(self.pool, k))

    def build(self) -> Conversation:
        for category in self.categories:
            getattr(self, f"_{category}")(len(self.drafts))
        return self._assemble()

    # one method per category: append a draft and plan its statements and decoys

    def _single_session_fact(self, q: int) -> None:
        rng = self.rng
        slot = self._pick(_FACT_SLOTS)
        value = rng.choice(list(slot.values))
        (session,) = self._evidence_sessions(1)
        self._state(session, rng.choice(list(slot.statements)).format(v=value), q)
        answer = slot.answer.format(v=value)
        self.drafts.append(_Draft("single_session_fact", rng.choice(list(slot.questions)), answer, evidence=[session]))
        self.decoys += [decoy.format(o=_other(rng, slot.values, value)) for decoy in slot.decoys]

    def _multi_session_aggregation(self, q: int) -> None:
        rng = self.rng
        slot = self._pick(_SUM_SLOTS)
        parts = rng.randint(2, 3)
        sessions = self._evidence_sessions(parts)
        templates = rng.sample(list(slot.statements), parts)
        contexts = rng.sample(list(slot.contexts), parts) if slot.contexts else [""] * parts
        total = 0
        for session, template, context in zip(sessions, templates, contexts):
            amount = rng.randrange(*slot.amounts)
            total += 1 if slot.count_only else amount
            spelled = _NUMBER_WORDS[amount] if slot.words else str(amount)
            self._state(session, template.format(n=spelled, x=context), q)
        answer = slot.answer.format(total=total)
        self.drafts.append(_Draft("multi_session_aggregation", rng.choice(list(slot.questions)), answer, evidence=sessions))
        self.decoys += list(slot.decoys)

    def _knowledge_update(self, q: int) -> None:
        rng = self.rng
        slot = self._pick(_UPDATE_SLOTS)
        old, new = slot.values(rng)
        sessions = self._evidence_sessions(2)
        self._state(sessions[0], rng.choice(list(slot.old)).format(v=old), q)
        self._state(sessions[1], rng.choice(list(slot.new)).format(v=new), q)
        self.drafts.append(_Draft("knowledge_update", rng.choice(list(slot.questions)), slot.answer.format(v=new), evidence=sessions))
        self.decoys += list(slot.decoys)

    def _temporal(self, q: int) -> None:
        rng = self.rng
        kind = rng.choice(("when", "order", "gap"))
        count = 1 if kind == "when" else 2
        events = [self._pick(_EVENTS) for _ in range(count)]
        sessions = self._evidence_sessions(count)
        for session, event in zip(sessions, events):
            self._state(session, event.statement, q)
        if kind == "when":
            question = rng.choice(_WHEN).format(past=events[0].past)
            answer = self.dates[sessions[0]].date().isoformat()
        else:
            a, b = rng.sample(events, 2)  # the question names them in random order
            if kind == "order":
                question = rng.choice(_ORDER).format(a=a.gerund, b=b.gerund)
                answer = events[0].gerund  # events[0] sits in the earlier session
            else:
                question = rng.choice(_GAP).format(a=a.gerund, b=b.gerund)
                answer = f"{(self.dates[sessions[1]].date() - self.dates[sessions[0]].date()).days} days"
        self.drafts.append(_Draft("temporal", question, answer, evidence=sessions))
        self.decoys += [event.decoy for event in events]

    def _preference(self, q: int) -> None:
        rng = self.rng
        slot = self._pick(_PREFERENCE_SLOTS)
        value = rng.choice(list(slot.values))
        (session,) = self._evidence_sessions(1)
        self._state(session, rng.choice(list(slot.statements)).format(v=value), q)
        self.drafts.append(_Draft("preference", rng.choice(list(slot.questions)), slot.answer.format(v=value), evidence=[session]))
        self.decoys += list(slot.decoys)

    def _abstention(self, q: int) -> None:
        slot = self._pick(_UNSTATED)
        self.drafts.append(_Draft("abstention", slot.question, ABSTENTION_ANSWER, abstention=True))
        self.decoys += list(slot.decoys)

    # turns

    def _assemble(self) -> Conversation:
        rng = self.rng
        lines = [list(plan) for plan in self.plans]
        for decoy in self.decoys:
            lines[rng.randrange(len(lines))].append((decoy, None))
        evidence_turns: dict[int, list[str]] = {}
        sessions: list[Session] = []
        for index, session_lines in enumerate(lines):
            talk = rng.sample(_SMALL_TALK_USER, rng.randint(*_SMALL_TALK))
            session_lines = session_lines + [(text, None) for text in talk]
            rng.shuffle(session_lines)
            session_id = f"{self.conversation_id}-s{index + 1:02d}"
            turns: list[Turn] = []
            for text, question in session_lines:
                reply, on_reply = self._exchange(text, question)
                exchange: tuple[tuple[Role, str, bool], ...] = (("user", text, not on_reply), ("assistant", reply, on_reply))
                for role, line, holds in exchange:
                    when = self.dates[index] + timedelta(minutes=2 * len(turns))
                    evidence = holds and question is not None
                    turn = Turn(f"{session_id}:{len(turns)}", session_id, role, line, when.isoformat(), evidence)
                    turns.append(turn)
                    if evidence and question is not None:
                        evidence_turns.setdefault(question, []).append(turn.turn_id)
            sessions.append(Session(session_id, self.dates[index].isoformat(), turns))
        asked = self.dates[-1] + timedelta(days=rng.randint(1, 10), hours=1)
        questions = [
            Question(
                question_id=f"{self.conversation_id}-q{q + 1}",
                category=draft.category,
                question=draft.question,
                answer=draft.answer,
                evidence_session_ids=[sessions[index].session_id for index in draft.evidence],
                evidence_turn_ids=evidence_turns.get(q, []),
                question_date=asked.isoformat(),
                abstention=draft.abstention,
                paraphrase=None if draft.abstention else draft.paraphrase,
            )
            for q, draft in enumerate(self.drafts)
        ]
        return Conversation(self.conversation_id, sessions, questions)

    def _exchange(self, text: str, question: int | None) -> tuple[str, bool]:
        """The assistant's reply to the user line ``text`` and whether the reply (not the user line) is the evidence."""
        return self._reply(text, question), False

    def _reply(self, text: str, question: int | None) -> str:
        if question is not None:
            return self.rng.choice(_ACKNOWLEDGEMENTS)
        return self.rng.choice(_ANSWERS if text.endswith("?") else _REACTIONS)


def conversation_plan(size: int | str) -> tuple[int, list[list[str]]]:
    """``(questions, the categories of each conversation)`` for ``size`` (conversation *i* asks each category whose count exceeds *i*)."""
    total = _resolve_size(size)
    counts = category_counts(total)
    return total, [[category for category in CATEGORIES if index < counts[category]] for index in range(max(counts.values()))]


def generate(seed: int = 0, size: int | str = "default") -> Benchmark:
    """The synthetic benchmark of ``size`` questions (see :func:`memlab.bench.conversations.synthetic`)."""
    total, plan = conversation_plan(size)
    rng = random.Random(seed)
    conversations = [_Builder(rng, index + 1, categories).build() for index, categories in enumerate(plan)]
    return Benchmark(f"synthetic-seed{seed}-{total}", conversations)
