"""The seeded *overlap* benchmark (:func:`memlab.bench.conversations.overlap`): questions in the user's own words.

The synthetic benchmark (:mod:`memlab.bench._synthetic`) words every question apart
from its evidence and plants decoys in the question's words, so shared words point
away from the answer. Real users ask the other way round: they come back to what they
said in the words they said it ("What did I name the beagle I adopted from the
shelter?" about "I adopted a beagle from the Elm Park shelter and named him Biscuit"),
and the names, products, places and numbers of their life recur across sessions
without answering anything ("The beagle dug up half the garden again"). This module
generates that character, on the same layout, model and gold evidence:

* every answerable question is either an **echo** (worded from its evidence's words)
  or, for exactly ``round(paraphrase * answerable)`` of them (default
  :data:`PARAPHRASE_SHARE` = 0.25, chosen by the seed), a **paraphrase** worded like
  the synthetic questions; :attr:`~memlab.bench.conversations.Question.paraphrase` says
  which;
* instead of decoys that copy the question, **mentions**: lines about the same
  things (a name, a product, a place, a number) that do not answer the question;
* some facts are the **assistant's** (a hotel, a recipe, a book it suggested): the
  evidence turn is the assistant's reply, as LongMemEval's
  ``single-session-assistant`` questions (the user's request is not evidence);
* the assistant answers at **length**, as chat assistants do: an opener, for a remark a
  sentence restating one of its words ("Good to know about beagle."), then 2-4 generic
  sentences of advice, so a whole exchange is 40-80 words, most of them not the user's.

Everything else is the synthetic benchmark's: 12-20 sessions 1-9 days apart, evidence
in fewer than half of them, small talk, the six categories in equal shares, the
abstention questions (with their decoys) and the ``size`` rule. Ids: conversation
``ovl-0001``, session ``ovl-0001-s03``, turn ``ovl-0001-s03:4``, question ``ovl-0001-q2``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memlab.bench._conversation_model import Benchmark
from memlab.bench._synthetic import (
    _ACKNOWLEDGEMENTS,
    _BANDS,
    _COMPANIES,
    _NAMES,
    _NUMBER_WORDS,
    _PET_NAMES,
    _TOWNS,
    _WEEKDAYS,
    _Builder,
    _Draft,
    _faster,
    _more,
    _other,
    _pool,
    _dearer,
    _UpdateSlot,
    conversation_plan,
)
from memlab.exceptions import ValidationError
from memlab.text import STOP_WORDS, content_words

__all__ = ["PARAPHRASE_SHARE", "generate"]

#: the share of answerable questions worded as paraphrases by default
PARAPHRASE_SHARE = 0.25


# -- single_session_fact ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Said:
    """One way of stating a fact (``{v}``), the question a user would ask about it, and lines mentioning its things (``{o}``: another value)."""

    statement: str
    echo: str
    mentions: Sequence[str] = ()


@dataclass(frozen=True)
class _Fact:
    """A fact stated once. ``asked``: the user's request when the fact is the assistant's reply (then ``statement`` is that reply)."""

    topic: str
    values: Sequence[str]
    said: Sequence[_Said]
    paraphrases: Sequence[str]
    answer: str = "{v}"
    asked: str = ""


_FACTS: tuple[_Fact, ...] = (
    _Fact(
        "pets", _PET_NAMES,
        (_Said("I adopted a beagle from the Elm Park shelter and named him {v}.", "What did I name the beagle I adopted from the shelter?",
               ("The beagle dug up half the garden again.", "The Elm Park shelter is running a charity walk next month.")),
         _Said("Our new rescue terrier is called {v}, and he already owns the sofa.", "What is our rescue terrier called?",
               ("The rescue centre sent us photos of the terrier's brothers.", "My neighbour's terrier {o} barked all night."))),
        ("What is my dog's name?", "What does my pup answer to?"),
    ),
    _Fact(
        "hometown", _TOWNS,
        (_Said("I grew up in {v}, right by the old harbour.", "Which town by the harbour is where I grew up?",
               ("The old harbour back home is all fancy restaurants now.", "My colleague grew up in {o}.")),
         _Said("Childhood in {v} meant rainy summers and long bike rides.", "Where did I spend my childhood of rainy summers?",
               ("Rainy summers make me miss long bike rides.", "My cousin spent her childhood in {o}."))),
        ("What place do I come from originally?",),
    ),
    _Fact(
        "job", ("pharmacist", "architect", "paramedic", "translator", "veterinarian", "carpenter", "librarian", "pastry chef"),
        (_Said("I've worked as a {v} for six years, mostly night shifts.", "What have I worked as for six years of night shifts?",
               ("Six years of night shifts have wrecked my sleep.", "My brother worked as a {o} before he retired.")),
         _Said("Being a {v} means I'm on my feet most of the day.", "What job keeps me on my feet most of the day?",
               ("My feet hurt after a long day.", "My friend is a {o} and works from home."))),
        ("What do I do for a living?", "What is my profession?"),
    ),
    _Fact(
        "sibling", _NAMES,
        (_Said("My younger sister {v} just started her nursing degree in Leeds.", "What's the name of my younger sister who started a nursing degree?",
               ("Leeds is a long train ride, but I'll visit my sister soon.", "A nursing degree takes three years here.")),
         _Said("My little brother {v} is visiting this weekend with his new girlfriend.", "What is my little brother called, the one visiting this weekend?",
               ("My brother's new girlfriend is lovely.", "My friend's little brother {o} is moving abroad."))),
        ("What is my sibling called?",),
    ),
    _Fact(
        "music", ("cello", "ukulele", "clarinet", "banjo", "harp", "trumpet", "accordion", "saxophone"),
        (_Said("I've been taking {v} lessons every Tuesday evening with Mr Osei.", "Which instrument am I taking lessons in on Tuesday evenings?",
               ("Mr Osei cancelled Tuesday's lesson because he was ill.", "My nephew is taking {o} lessons too.")),
         _Said("Practised {v} scales for an hour before dinner.", "What instrument have I been practising scales on?",
               ("Scales are boring but my teacher insists.", "The school band needs a {o} player."))),
        ("What am I learning to play?",),
    ),
    _Fact(
        "health", ("shellfish", "peanuts", "sesame", "kiwi", "mustard", "celery"),
        (_Said("I'm allergic to {v}, one bite and I break out in hives.", "What am I allergic to that gives me hives?",
               ("The hives took two days to calm down.", "My coworker is allergic to {o}.")),
         _Said("I always check labels for {v} because of my allergy.", "Which ingredient do I check labels for because of my allergy?",
               ("Food labels are so hard to read.", "My allergy nurse is moving to another clinic."))),
        ("Which food gives me a bad reaction?",),
    ),
    _Fact(
        "vehicle", ("Volvo estate", "Subaru Outback", "Mini Cooper", "Toyota Prius", "Skoda Octavia", "Mazda MX-5", "Fiat Panda"),
        (_Said("Last month I bought a second-hand car, a {v}.", "Which second-hand car did I buy last month?",
               ("The second-hand car market is crazy right now.", "My dad keeps telling me to get a {o}.")),
         _Said("My {v} needs new tyres before winter.", "Which car of mine needs new tyres before winter?",
               ("Winter tyres are expensive this year.", "My neighbour's {o} needs new brakes."))),
        ("What vehicle do I drive?",),
    ),
    _Fact(
        "employer", _COMPANIES,
        (_Said("I started as a data analyst at {v} in March.", "Which company did I start at as a data analyst in March?",
               ("The data analyst team had a long meeting about the March figures.", "My friend just got an offer from {o}.")),
         _Said("The people at {v} threw me a welcome lunch last week.", "Where did the people throw me a welcome lunch?",
               ("The welcome lunch was at a tapas place.", "My sister's team at {o} is hiring."))),
        ("Who employs me?",),
    ),
    _Fact(
        "education", ("geology", "marine biology", "philosophy", "economics", "linguistics", "chemistry", "art history"),
        (_Said("I majored in {v} at university, which nobody ever guesses.", "What was the subject I majored in at university?",
               ("University friends are coming over this weekend.", "My roommate at university majored in {o}.")),),
        ("What was my field of study?",),
    ),
    _Fact(
        "birthday", ("3 March", "17 June", "9 October", "28 January", "14 August", "22 November"),
        (_Said("My birthday is on {v}, so I'm planning a picnic in the park.", "When is my birthday, the one I'm planning a picnic for?",
               ("The park near us is perfect for a picnic.", "My mum's birthday is on {o}.")),),
        ("On what day was I born?",),
    ),
    _Fact(
        "language", ("Portuguese", "Japanese", "Korean", "Italian", "Dutch", "Turkish", "Polish", "Swahili"),
        (_Said("I've been practising {v} with an app every morning before work.", "Which language have I been practising with an app every morning?",
               ("The language app keeps sending me reminders.", "My cousin speaks fluent {o}.")),),
        ("What foreign tongue am I studying?",),
    ),
    _Fact(
        "home", ("third", "fifth", "seventh", "ninth", "eleventh"),
        (_Said("We live on the {v} floor and the lift is always broken.", "Which floor do we live on, with the broken lift?",
               ("The lift was broken again this morning.", "My friend lives on the {o} floor.")),),
        ("How high up is my flat?",),
        answer="the {v} floor",
    ),
    _Fact(
        "family", _NAMES,
        (_Said("My husband {v} surprised me with dinner at the Italian place last night.",
               "What's the name of my husband who took me to the Italian place?",
               ("The Italian place on the corner has new owners.", "My best friend's husband {o} is a chef.")),),
        ("Who am I married to?",),
    ),
    _Fact(
        "commute", ("25", "35", "40", "50", "55"),
        (_Said("The tram ride to my office takes about {v} minutes.", "How many minutes does the tram ride to my office take?",
               ("The tram was packed this morning.", "My sister's bus ride to her office takes {o} minutes.")),),
        ("How long is my journey to work?",),
        answer="{v} minutes",
    ),
    _Fact(
        "coffee", ("oat flat white", "double espresso", "iced americano", "cortado", "chai latte", "mocha"),
        (_Said("I get an {v} from the kiosk at Central Station every morning.", "What do I get from the kiosk at Central Station every morning?",
               ("The kiosk at Central Station was closed today.", "My manager always orders a {o}.")),),
        ("What's my usual café order?",),
    ),
    # the assistant's facts: the user asks, the assistant's reply is the evidence
    _Fact(
        "hotel", ("Casa do Rio", "Hotel Ribeira", "Pensão Azul", "Douro Lodge"),
        (_Said("For a quiet stay in Porto near the river, try the {v}: family-run and two minutes from the water.",
               "What was the quiet hotel in Porto near the river you recommended?",
               ("We're still deciding between Porto and Lisbon for the trip.", "Is the river in Porto busy in summer?")),),
        ("Which place to stay did you suggest for my city break?",),
        asked="Can you recommend a quiet hotel in Porto close to the river?",
    ),
    _Fact(
        "recipe", ("chana saag", "chickpea and spinach stew", "spinach falafel", "chickpea curry"),
        (_Said("With leftover chickpeas and spinach, a {v} works well: fry the chickpeas, wilt the spinach, finish with lemon.",
               "What dish did you suggest for my leftover chickpeas and spinach?",
               ("I bought too many chickpeas again.", "Is spinach better raw or cooked?")),),
        ("What was that recipe idea you gave me?",),
        asked="What can I cook with leftover chickpeas and spinach?",
    ),
    _Fact(
        "reading", ("Butterflies in November", "Independent People", "Jar City", "The Blue Fox"),
        (_Said("For your book club, {v} is a good pick: a short novel set in Iceland, easy to discuss.",
               "Which novel about Iceland did you suggest for my book club?",
               ("My book club meets on Thursday.", "I'd love to visit Iceland one day.")),),
        ("What reading did you propose for our monthly group?",),
        asked="Can you suggest a novel about Iceland for my book club?",
    ),
    _Fact(
        "posture", ("cat-cow stretch", "child's pose", "seated twist", "doorway stretch"),
        (_Said("For a sore back after long desk days, try the {v}: hold it for thirty seconds, three times, every couple of hours.",
               "What stretch did you suggest for my back after long desk days?",
               ("My desk chair is terrible for my back.", "I've been sitting at my desk for ten hours straight.")),),
        ("Which exercise did you propose for my aching spine?",),
        asked="My back hurts after long days at the desk, any stretch I could do?",
    ),
)


# -- multi_session_aggregation ---------------------------------------------------------------


@dataclass(frozen=True)
class _Sum:
    """Amounts stated in 2-3 sessions ({n}; {x} a context value); the question asks their total."""

    topic: str
    statements: Sequence[str]
    echoes: Sequence[str]
    paraphrases: Sequence[str]
    answer: str
    amounts: tuple[int, int, int]
    mentions: Sequence[str]
    contexts: Sequence[str] = ()
    words: bool = False


_SUMS: tuple[_Sum, ...] = (
    _Sum(
        "books",
        ("I finished {n} books on the flight to {x}.", "Got through {n} more books over the long weekend.",
         "My reading circle had me finish {n} books this month."),
        ("How many books have I finished in total?",), ("What number of novels have I gotten through altogether?",),
        "{total}", (2, 5, 1), ("My sister finished twelve books on her holiday.", "The library has a books sale on Saturday."),
        contexts=_TOWNS, words=True,
    ),
    _Sum(
        "charity",
        ("I donated ${n} to the animal shelter fundraiser.", "Donated ${n} to the flood relief appeal yesterday.",
         "I donated ${n} at the hospice fun run."),
        ("How much have I donated in total?",), ("What is the total I've given away to good causes?",),
        "${total}", (10, 105, 5), ("My company matches what employees donate.", "The hospice is asking for volunteers."),
    ),
    _Sum(
        "hiking",
        ("We hiked {n} miles along the ridge on Saturday.", "Hiked a {n} mile loop around the reservoir with my brother.",
         "Hiked {n} miles through the forest to the waterfall."),
        ("How many miles have I hiked altogether?",), ("What total distance have I covered on foot in the hills?",),
        "{total} miles", (3, 15, 1), ("The reservoir path is closed for repairs.", "My friend hiked the whole coastal trail last year."),
    ),
    _Sum(
        "plants",
        ("I bought {n} succulents at the plant market.", "The garden centre had a sale, so I bought {n} more plants.",
         "A neighbour gave me {n} plants when she moved."),
        ("How many plants have I got recently?",), ("What is the number of new greenery pots I've acquired?",),
        "{total}", (2, 6, 1), ("My aunt has more plants than furniture.", "The plant market is on every Sunday."),
        words=True,
    ),
    _Sum(
        "baking",
        ("I baked {n} loaves of sourdough for the neighbours.", "Baked {n} banana breads for the school fair.",
         "Baked {n} batches of cinnamon rolls for the office."),
        ("How many things have I baked in total?",), ("What is the overall count of what came out of my oven?",),
        "{total}", (2, 6, 1), ("My grandmother baked bread every day.", "The school fair raised a lot of money."),
        words=True,
    ),
    _Sum(
        "fitness",
        ("I went to {n} spin classes this week.", "Did {n} spin classes at the gym before the holiday.",
         "Managed {n} early spin classes this fortnight."),
        ("How many spin classes have I done in total?",), ("What is the count of my stationary bike workouts?",),
        "{total}", (2, 6, 1), ("The spin instructor plays terrible music.", "My trainer says three classes a week is plenty."),
        words=True,
    ),
    _Sum(
        "concerts",
        ("The tickets for {x} cost me ${n}.", "I paid ${n} for tickets to see {x} at the arena.", "Spent ${n} on festival tickets to catch {x}."),
        ("How much have I paid for tickets overall?",), ("What is my overall spending on live music?",),
        "${total}", (25, 125, 5), ("Tickets for the arena sell out in minutes.", "My friend spends a fortune on festival tickets."),
        contexts=_BANDS,
    ),
    _Sum(
        "overtime",
        ("I worked {n} extra hours at the office on Tuesday.", "Worked {n} extra hours to finish the audit.",
         "Put in {n} extra hours on Saturday for the deadline."),
        ("How many extra hours have I worked in total?",), ("What is my overall amount of overtime?",),
        "{total} hours", (2, 6, 1), ("My colleague never works extra hours.", "The audit deadline moved again."),
    ),
)


# -- knowledge_update ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Update:
    """A value stated (``old``), then replaced in a later session (``new``); the latest wins."""

    slot: _UpdateSlot  # values, old / new statements, the paraphrased ``questions``, the answer; its decoys are unused
    echoes: Sequence[str]
    mentions: Sequence[str]

    @property
    def topic(self) -> str:
        return self.slot.topic


def _update(
    topic: str,
    values: Callable[[random.Random], tuple[str, str]],
    old: Sequence[str],
    new: Sequence[str],
    echoes: Sequence[str],
    paraphrases: Sequence[str],
    mentions: Sequence[str],
    answer: str = "{v}",
) -> _Update:
    return _Update(_UpdateSlot(topic, values, old, new, paraphrases, (), answer), echoes, mentions)


_UPDATES: tuple[_Update, ...] = (
    _update(
        "home", _pool(("Elm Street", "Harbour Lane", "Mill Road", "Station Avenue", "Castle Terrace", "Orchard Way")),
        ("I moved into a flat on {v} this month.", "Our flat on {v} has a tiny garden."),
        ("We moved again, our new flat is on {v}.", "Unpacked the last boxes at the new flat on {v}."),
        ("Which street is my flat on now?",), ("Where do I currently reside?",),
        ("The flat above ours is empty again.", "Moving flats is exhausting."),
    ),
    _update(
        "employer", _pool(_COMPANIES),
        ("I work at {v} on the billing team.", "Another long week at {v} on the billing team."),
        ("I handed in my notice and started at {v} on Monday.", "First week at {v} done, the new team is great."),
        ("Where do I work now that I started the new job?",), ("Which company am I with these days?",),
        ("The billing team is having a leaving party.", "A new job always takes a month to settle into."),
    ),
    _update(
        "running", _faster,
        ("My best 5k time is {v}, and I'm trying to beat it.", "Parkrun this morning, still stuck on my {v} best 5k time."),
        ("New best 5k time at parkrun today: {v}!", "Beat my best 5k time this morning, {v}!"),
        ("What is my best 5k time now?",), ("How quickly can I cover five kilometres these days?",),
        ("Parkrun was muddy this morning.", "My running club's fastest member does a 5k in seventeen minutes."),
    ),
    _update(
        "pets", _more,
        ("We have {v} cats at the moment.", "Feeding our {v} cats takes a whole tin every morning."),
        ("We adopted another kitten, so we have {v} cats now.", "With the new kitten there are {v} cats on the sofa."),
        ("How many cats do we have now?",), ("What is the size of my animal household?",),
        ("The cats knocked a plant off the shelf.", "My neighbour's cat sleeps on our doorstep."),
    ),
    _update(
        "phone", _pool(("Pixel 6", "iPhone 12", "Galaxy S21", "Fairphone 4", "Nokia X20", "Moto G9")),
        ("I'm still using my old {v}, the battery is dying.", "My old {v} fell in the sink again."),
        ("Finally got a new phone, a {v}, and the camera is amazing.", "Set up my new phone last night, a {v}."),
        ("Which phone am I using now?",), ("What handset do I carry these days?",),
        ("My phone bill went up again.", "My mum refuses to replace her phone from 2015."),
    ),
    _update(
        "fitness", _pool(_WEEKDAYS),
        ("I do yoga every {v} evening at the studio.", "{v} yoga at the studio is the highlight of my week."),
        ("The studio moved my yoga class to {v} evenings.", "My yoga class is on {v} now, new timetable."),
        ("Which evening is my yoga class at the studio now?",), ("On which day of the week do I have my mat practice at present?",),
        ("The yoga studio raised its prices.", "My friend does yoga every morning."),
    ),
    _update(
        "housing", _dearer,
        ("Our rent is ${v} a month.", "Paid the landlord ${v} rent again."),
        ("The landlord raised the rent, we now pay ${v} a month.", "Rent went up to ${v} a month."),
        ("How much rent do we pay the landlord now?",), ("What do I pay for accommodation these days?",),
        ("The landlord still hasn't fixed the boiler.", "Rent in this city is out of control."),
        answer="${v} a month",
    ),
    _update(
        "manager", _pool(_NAMES),
        ("My manager {v} is super supportive.", "Had my review with my manager {v} today."),
        ("After the reorg, my new manager is {v}.", "{v} took over as my manager after the reorg."),
        ("Who is my manager now after the reorg?",), ("Who supervises me at present?",),
        ("The reorg meeting ran over by an hour.", "My brother says his manager never replies to messages."),
    ),
    _update(
        "commute", _pool(("bike", "bus", "train", "tram", "scooter", "car share")),
        ("I get to the office by {v} most days.", "Took the {v} to the office this morning."),
        ("I've switched to going to the office by {v}.", "These days I take the {v} to the office."),
        ("How do I get to the office these days?",), ("What is my current way of getting to my job?",),
        ("The office car park is being rebuilt.", "My colleague's way into the office involves two ferries."),
    ),
)


# -- temporal --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Happening:
    """Something that happens on the day of its session; ``echo_*`` reuse the statement's words, ``para_*`` do not."""

    topic: str
    statement: str
    echo_past: str  # completes "When did I ...?"
    echo_gerund: str
    para_past: str
    para_gerund: str
    mention: str


_HAPPENINGS: tuple[_Happening, ...] = (
    _Happening("health", "Just got back from the dentist, two fillings, ouch.", "get two fillings at the dentist",
               "getting two fillings at the dentist", "have my teeth fixed", "having my teeth fixed", "My sister goes to the same dentist."),
    _Happening("running", "Ran my first 10k race this morning and didn't stop once!", "run my first 10k race", "running my first 10k race",
               "complete a ten kilometre run", "completing a ten kilometre run", "The 10k race route goes past our street."),
    _Happening("home", "We signed the lease on the new flat today.", "sign the lease on the new flat", "signing the lease on the new flat",
               "commit to renting the new apartment", "committing to renting the new apartment", "The lease paperwork was twenty pages long."),
    _Happening("glasses", "Picked up my new glasses from the optician this afternoon.", "pick up my new glasses from the optician",
               "picking up my new glasses", "collect my spectacles", "collecting my spectacles", "The optician said my eyes haven't changed much."),
    _Happening("vehicle", "Passed my driving test today!", "pass my driving test", "passing my driving test", "earn my licence",
               "earning my licence", "My cousin failed his driving test twice."),
    _Happening("family", "Picked my parents up at the airport this morning, they flew in from Lisbon.", "pick my parents up at the airport",
               "picking my parents up at the airport", "welcome my mother and father for their visit", "welcoming my mother and father",
               "The airport bus is always late."),
    _Happening("garden", "Got the keys to our allotment plot today.", "get the keys to our allotment plot", "getting the allotment plot keys",
               "receive access to the community garden", "receiving access to the community garden",
               "Our allotment plot neighbour grows huge pumpkins."),
    _Happening("education", "Finally submitted my thesis this morning.", "submit my thesis", "submitting my thesis", "hand in my dissertation",
               "handing in my dissertation", "My thesis supervisor is on holiday."),
    _Happening("crafts", "I started my pottery course tonight.", "start my pottery course", "starting my pottery course",
               "begin the ceramics class", "beginning the ceramics class", "The pottery course is in the old school hall."),
    _Happening("furniture", "Our new sofa was finally delivered this afternoon.", "get our new sofa delivered", "getting the new sofa delivered",
               "get the new couch", "getting the new couch", "The old sofa is going to my cousin."),
    _Happening("vaccine", "I got my flu jab at the pharmacy today.", "get my flu jab at the pharmacy", "getting my flu jab",
               "get vaccinated", "getting vaccinated", "The pharmacy queue was out the door."),
    _Happening("travel", "Booked the tickets for our trip to Kyoto today.", "book the tickets for our trip to Kyoto",
               "booking the Kyoto trip tickets", "reserve travel to Japan", "reserving travel to Japan", "Kyoto is supposed to be lovely in autumn."),
)

_WHEN = ("When did I {past}?", "On what date did I {past}?")
_ORDER = ("Which happened first: {a}, or {b}?", "What came earlier, {a} or {b}?")
_GAP = ("How many days passed between {a} and {b}?", "How long was it, in days, from {a} to {b}?")


# -- preference ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Taste:
    """A stated taste; the question asks for a recommendation that should honour it."""

    topic: str
    values: Sequence[str]
    statements: Sequence[str]
    echoes: Sequence[str]
    paraphrases: Sequence[str]
    answer: str
    mentions: Sequence[str]


_TASTES: tuple[_Taste, ...] = (
    _Taste(
        "cooking", ("Thai", "Ethiopian", "Sichuan", "Mexican", "Lebanese", "Keralan"),
        ("I've been vegetarian for years and I love {v} food.", "Nothing beats spicy vegetarian {v} food."),
        ("Any vegetarian dinner ideas for this weekend?",), ("What should I prepare for supper on Saturday?",),
        "Suggest vegetarian {v} dishes.", ("The vegetarian place in town closed down.", "My roommate cooks dinner from a meal kit every weekend."),
    ),
    _Taste(
        "travel", ("mountain cabin", "lakeside hut", "forest lodge", "island cottage"),
        ("Crowded beaches are my nightmare, give me a quiet {v} with hiking trails.", "My ideal holiday is a quiet {v} with trails from the door."),
        ("Where should I go for a quiet holiday with hiking?",), ("Can you recommend a destination for my break next month?",),
        "Recommend a quiet {v} getaway with hiking.", ("My boss just came back from a holiday at a huge resort.", "Hiking boots are so expensive."),
    ),
    _Taste(
        "books", ("hard science fiction", "historical mysteries", "Nordic noir", "narrative nonfiction"),
        ("I only enjoy {v}, anything with dragons bores me.", "Give me {v} over fantasy every time."),
        ("What should I read next, given that fantasy bores me?",), ("What should I pick up at the library?",),
        "Recommend {v}, not fantasy.", ("My book club's fantasy pick was a thousand pages long.", "I read on the train every morning."),
    ),
    _Taste(
        "music", ("jazz piano trios", "ambient electronica", "baroque harpsichord", "lo-fi hip hop"),
        ("Nothing helps me focus like {v}.", "When I need to focus I put {v} on repeat."),
        ("What music could help me focus at my desk?",), ("Any suggestions for something to listen to while I concentrate?",),
        "Suggest {v}.", ("My colleague can only focus in silence.", "The office music is terrible."),
    ),
    _Taste(
        "running", ("swimming", "rowing", "cycling", "pilates"),
        ("My knees can't handle running anymore, but I love {v}.", "After the knee surgery, {v} is the only exercise that feels good."),
        ("What exercise would suit my knees now that running is out?",), ("Can you design a workout plan for me?",),
        "Suggest a low-impact {v} routine rather than running.", ("My knees ache when it rains.", "The running club meets on Sundays."),
    ),
    _Taste(
        "films", ("Korean", "Scandinavian", "French", "Japanese"),
        ("I'm hooked on slow-burn {v} thrillers lately.", "Slow-burn {v} crime thrillers are my favourite."),
        ("Can you suggest a slow-burn thriller for tonight?",), ("What movie should I watch this evening?",),
        "Recommend a slow-burn {v} thriller.", ("The cinema near us only shows blockbusters.", "My brother watched a terrible thriller and loved it."),
    ),
    _Taste(
        "gifts", ("vintage maps", "handmade ceramics", "vinyl records", "fountain pens"),
        ("My partner collects {v}, the stranger the better.", "Nothing makes my partner happier than new {v} for the collection."),
        ("What should I get my partner for our anniversary, something for the collection?",), ("Any present ideas for the person I live with?",),
        "Suggest {v} for the partner's collection.", ("My partner's birthday is in June.", "Anniversary dinners are so expensive now."),
    ),
)


# -- the assistant's replies -------------------------------------------------------------------

#: a reply that restates what the user said, as assistants do ({w}: a content word of the user's line)
_ECHOES = (
    "It sounds like {w} has been on your mind.",
    "Thanks for the update about {w}.",
    "Good to know about {w}.",
    "I'll remember what you said about {w}.",
)
#: the rest of an assistant's reply: generic advice, as long chat answers go
_BODY = (
    "Here are a few things you might keep in mind.",
    "It often helps to plan a little ahead and keep notes.",
    "Many people find that a small routine makes a big difference.",
    "If anything changes, just let me know and we can adjust.",
    "Small steps add up faster than you would expect.",
    "It is worth checking the details before committing to anything.",
    "A quick search for local options can also turn up good ideas.",
    "Try not to take on too much at once.",
    "Keeping a simple list can make the next few weeks easier.",
    "It might also be worth asking friends what worked for them.",
    "Give it a couple of weeks before deciding how it is going.",
    "Timing can matter as much as the choice itself.",
    "There is no single right answer, it depends on what suits you.",
    "Budget and time are usually the two things to balance.",
    "You can always revisit the decision later.",
    "Writing down what went well helps next time.",
    "It is normal for this to take a while to settle.",
    "Taking a short break now and then keeps things manageable.",
    "A calendar reminder can help you stay on track.",
    "Feel free to share more details and I can be more specific.",
    "Some people prefer to start small and build up gradually.",
    "Comparing two or three options side by side usually helps.",
    "Remember to look after yourself along the way.",
    "I hope that helps a little.",
)
_BODY_SENTENCES = (2, 4)  # generic sentences per reply, inclusive


# -- assembly --------------------------------------------------------------------------------


class _OverlapBuilder(_Builder):
    """One overlap conversation. ``wordings`` (shared by every conversation of the benchmark) holds, per answerable
    question still to come, True for a paraphrase; each draft takes the first. Abstention is the synthetic builder's."""

    prefix = "ovl"

    def __init__(self, rng: random.Random, index: int, categories: Sequence[str], wordings: list[bool]) -> None:
        super().__init__(rng, index, categories)
        self.wordings = wordings
        #: user line -> the assistant's reply that is the evidence (the assistant's facts)
        self.replies: dict[str, str] = {}

    def _wording(self, echoes: Sequence[str], paraphrases: Sequence[str]) -> tuple[str, bool]:
        paraphrase = self.wordings.pop(0)
        return self.rng.choice(list(paraphrases if paraphrase else echoes)), paraphrase

    def _draft(self, category: str, echoes: Sequence[str], paraphrases: Sequence[str], answer: str, sessions: list[int]) -> None:
        question, paraphrase = self._wording(echoes, paraphrases)
        self.drafts.append(_Draft(category, question, answer, evidence=sessions, paraphrase=paraphrase))

    def _single_session_fact(self, q: int) -> None:
        rng = self.rng
        fact = self._pick(_FACTS)
        value = rng.choice(list(fact.values))
        said = rng.choice(list(fact.said))
        (session,) = self._evidence_sessions(1)
        statement = said.statement.format(v=value)
        if fact.asked:
            self.replies[fact.asked] = statement
            self._state(session, fact.asked, q)
        else:
            self._state(session, statement, q)
        self._draft("single_session_fact", [said.echo], fact.paraphrases, fact.answer.format(v=value), [session])
        self.decoys += [mention.format(o=_other(rng, fact.values, value)) for mention in said.mentions]

    def _multi_session_aggregation(self, q: int) -> None:
        rng = self.rng
        slot = self._pick(_SUMS)
        parts = rng.randint(2, 3)
        sessions = self._evidence_sessions(parts)
        templates = rng.sample(list(slot.statements), parts)
        contexts = rng.sample(list(slot.contexts), parts) if slot.contexts else [""] * parts
        total = 0
        for session, template, context in zip(sessions, templates, contexts):
            amount = rng.randrange(*slot.amounts)
            total += amount
            self._state(session, template.format(n=_NUMBER_WORDS[amount] if slot.words else str(amount), x=context), q)
        self._draft("multi_session_aggregation", slot.echoes, slot.paraphrases, slot.answer.format(total=total), sessions)
        self.decoys += list(slot.mentions)

    def _knowledge_update(self, q: int) -> None:
        rng = self.rng
        update = self._pick(_UPDATES)
        slot = update.slot
        old, new = slot.values(rng)
        sessions = self._evidence_sessions(2)
        self._state(sessions[0], rng.choice(list(slot.old)).format(v=old), q)
        self._state(sessions[1], rng.choice(list(slot.new)).format(v=new), q)
        self._draft("knowledge_update", update.echoes, slot.questions, slot.answer.format(v=new), sessions)
        self.decoys += list(update.mentions)

    def _temporal(self, q: int) -> None:
        rng = self.rng
        kind = rng.choice(("when", "order", "gap"))
        count = 1 if kind == "when" else 2
        events = [self._pick(_HAPPENINGS) for _ in range(count)]
        sessions = self._evidence_sessions(count)
        for session, event in zip(sessions, events):
            self._state(session, event.statement, q)
        paraphrase = self.wordings.pop(0)

        def past(event: _Happening) -> str:
            return event.para_past if paraphrase else event.echo_past

        def gerund(event: _Happening) -> str:
            return event.para_gerund if paraphrase else event.echo_gerund

        if kind == "when":
            question = rng.choice(_WHEN).format(past=past(events[0]))
            answer = self.dates[sessions[0]].date().isoformat()
        else:
            a, b = rng.sample(events, 2)
            if kind == "order":
                question = rng.choice(_ORDER).format(a=gerund(a), b=gerund(b))
                answer = gerund(events[0])
            else:
                question = rng.choice(_GAP).format(a=gerund(a), b=gerund(b))
                answer = f"{(self.dates[sessions[1]].date() - self.dates[sessions[0]].date()).days} days"
        self.drafts.append(_Draft("temporal", question, answer, evidence=sessions, paraphrase=paraphrase))
        self.decoys += [event.mention for event in events]

    def _preference(self, q: int) -> None:
        rng = self.rng
        taste = self._pick(_TASTES)
        value = rng.choice(list(taste.values))
        (session,) = self._evidence_sessions(1)
        self._state(session, rng.choice(list(taste.statements)).format(v=value), q)
        self._draft("preference", taste.echoes, taste.paraphrases, taste.answer.format(v=value), [session])
        self.decoys += list(taste.mentions)

    def _exchange(self, text: str, question: int | None) -> tuple[str, bool]:
        """A long reply: the fact (the assistant's facts) or an opener and, for a remark, an echo of one of its words; then generic advice."""
        rng = self.rng
        fact = self.replies.get(text) if question is not None else None
        parts = [fact if fact is not None else self._reply(text, question)]
        words = sorted(content_words(text) - STOP_WORDS)
        if fact is None and words and not text.endswith("?"):
            parts.append(rng.choice(_ECHOES).format(w=rng.choice(words)))
        parts += rng.sample(_BODY, rng.randint(*_BODY_SENTENCES))
        return " ".join(parts), fact is not None


def _check_share(paraphrase: float) -> float:
    if isinstance(paraphrase, bool) or not isinstance(paraphrase, (int, float)) or not 0.0 <= float(paraphrase) <= 1.0:
        raise ValidationError(f"paraphrase must be a share in [0, 1], got {paraphrase!r}")
    return float(paraphrase)


def generate(seed: int = 0, size: int | str = "default", paraphrase: float = PARAPHRASE_SHARE) -> Benchmark:
    """The overlap benchmark of ``size`` questions (see :func:`memlab.bench.conversations.overlap`)."""
    share = _check_share(paraphrase)
    total, plan = conversation_plan(size)
    rng = random.Random(seed)
    answerable = sum(category != "abstention" for categories in plan for category in categories)
    paraphrased = int(share * answerable + 0.5)  # round half up
    wordings = [True] * paraphrased + [False] * (answerable - paraphrased)
    rng.shuffle(wordings)
    conversations = [_OverlapBuilder(rng, index + 1, categories, wordings).build() for index, categories in enumerate(plan)]
    return Benchmark(f"overlap-seed{seed}-{total}" + ("" if share == PARAPHRASE_SHARE else f"-p{share:g}"), conversations)
