import pytest

from utils.errors import ConfigError
from utils.registry import Registry, snake_case


def test_register_get_build_and_iterate():
    reg = Registry("thing")

    @reg.register()
    class MyThing:
        def __init__(self, size: int = 1):
            self.size = size

    @reg.register("other")
    def make_other(size: int = 2):
        return size * 10

    assert "my_thing" in reg and "other" in reg and "nope" not in reg
    assert reg.get("my_thing") is MyThing
    assert reg.build("my_thing", size=3).size == 3
    assert reg.build("other", size=4) == 40
    assert list(reg) == ["my_thing", "other"] == reg.names()
    assert len(reg) == 2


def test_snake_case_names():
    assert snake_case("SmallCNN") == "small_cnn"
    assert snake_case("MyNet") == "my_net"
    assert snake_case("cross_entropy") == "cross_entropy"


def test_duplicate_name_names_both_definitions():
    reg = Registry("thing")

    @reg.register("a")
    class First:
        pass

    with pytest.raises(KeyError) as err:

        @reg.register("a")
        class Second:
            pass

    message = err.value.args[0]
    assert "defined twice" in message and message.count("test_registry.py") == 2


def test_unknown_name_lists_known_and_suggests_closest():
    reg = Registry("network")
    reg.register("classifier")(type("C", (), {}))
    reg.register("minet")(type("M", (), {}))
    with pytest.raises(KeyError) as err:
        reg.get("clasifier")
    message = err.value.args[0]
    assert "unknown network 'clasifier'" in message
    assert "known: classifier (C), minet (M)" in message
    assert "did you mean 'classifier' (class C)?" in message


def test_build_with_unknown_argument_lists_accepted_ones():
    reg = Registry("thing")

    @reg.register("t")
    class T:
        def __init__(self, width: int = 1):
            pass

    with pytest.raises(ConfigError, match=r"unknown argument\(s\) \['depth'\].*width"):
        reg.build("t", depth=3)
    with pytest.raises(ConfigError, match=r"thing 'u': missing a required argument: 'width'; it takes: width"):
        reg.register("u")(lambda width: width)
        reg.build("u")


def test_a_type_error_inside_the_constructor_is_not_taken_for_bad_arguments():
    reg = Registry("thing")

    @reg.register("buggy")
    class Buggy:
        def __init__(self, width: int = 1):
            self.size = "w" + width  # the user's own bug

    with pytest.raises(TypeError) as err:
        reg.build("buggy", width=3)
    assert not isinstance(err.value, ConfigError) and err.traceback[-1].name == "__init__"


def test_location_is_imported_on_first_lookup():
    from utils.registry import BACKBONES, DATASETS, LOSSES, NETWORKS

    assert "small_cnn" in BACKBONES and "resnet50" in BACKBONES
    assert "classifier" in NETWORKS
    assert {"cross_entropy", "bce_with_logits"} <= set(LOSSES.names())
    assert {"digits", "image_folder"} <= set(DATASETS.names())


def test_a_class_name_resolves_to_its_registered_name():
    reg = Registry("network")

    @reg.register()
    class MyNet:
        pass

    reg.register("other")(type("Other", (), {}))
    assert reg.get("MyNet") is MyNet and reg.get("my_net") is MyNet and reg.resolve("MyNet") == "my_net"
    assert "MyNet" in reg and "Mynet" not in reg
    with pytest.raises(KeyError) as err:
        reg.get("MyNte")
    assert "known: my_net (MyNet), other (Other); did you mean 'my_net' (class MyNet)?" in str(err.value)
    reg.register("twin_a")(type("Twin", (), {}))
    reg.register("twin_b")(type("Twin", (), {}))
    with pytest.raises(KeyError, match="class name 'Twin' is ambiguous: it is registered as twin_a, twin_b"):
        reg.get("Twin")
