//! The members the mapping reads, taken out of an issue's `fields` text in one pass with typed,
//! borrowing deserializers: no tree of values is built, members the mapping never reads are
//! skipped unread. Each reader is lenient exactly as the reading of a parsed `Value` is (a member
//! of another type reads as missing); anything this pass cannot read (a member twice in one
//! object, say) is an error, and the caller then reads the text as a `Value`.

use super::{FieldIds, LinkParts, MirrorComment, Picked};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::marker::PhantomData;

/// A member read as `text` reads a `Value`: a string, or the JSON text of a number; anything else
/// (skipped unread) is `None`.
#[derive(Debug, Default)]
struct Text(Option<String>);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor { numbers: true })
    }
}

/// A member read as `Value::as_str` reads it: a string only.
#[derive(Debug, Default)]
struct Str(Option<String>);

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(TextVisitor { numbers: false })
            .map(|text| Str(text.0))
    }
}

struct TextVisitor {
    numbers: bool,
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text(Some(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
        Ok(Text(Some(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
        Ok(Text(self.numbers.then(|| v.to_string())))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
        Ok(Text(self.numbers.then(|| v.to_string())))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
        Ok(Text(
            self.numbers
                .then(|| serde_json::Number::from_f64(v).map(|n| n.to_string()))
                .flatten(),
        ))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }
}

/// The visitor methods for every scalar (a string, a number, a boolean, null), each giving
/// `$none`: what a member of the wrong kind reads as.
macro_rules! scalars_read_as {
    ($none:expr) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($none)
        }

        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($none)
        }

        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($none)
        }

        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($none)
        }

        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($none)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
    };
}

/// An object read as `T`; anything else (skipped unread) is `None`, as `Value::get` finds
/// nothing in a value that is not an object.
#[derive(Debug)]
struct Lenient<T>(Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Lenient(Some(t)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient(None))
    }

    scalars_read_as!(Lenient(None));
}

/// An array of `T` (elements of another shape dropped); anything else is `None`, as
/// `Value::as_array` reads it.
#[derive(Debug)]
struct Items<T>(Option<Vec<T>>);

impl<T> Default for Items<T> {
    fn default() -> Self {
        Items(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ItemsVisitor(PhantomData))
    }
}

struct ItemsVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ItemsVisitor<T> {
    type Value = Items<T>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<T>()? {
            items.push(item);
        }
        Ok(Items(Some(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Items(None))
    }

    scalars_read_as!(Items(None));
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Name {
    name: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Key {
    key: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct User {
    name: Text,
    #[serde(rename = "displayName")]
    display_name: Text,
}

impl Lenient<User> {
    /// `name` (Server's login), else `displayName`.
    fn login(self) -> Option<String> {
        self.0.and_then(|u| u.name.0.or(u.display_name.0))
    }
}

impl Lenient<Name> {
    fn name(self) -> Option<String> {
        self.0.and_then(|n| n.name.0)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Link {
    id: Text,
    #[serde(rename = "type")]
    link_type: Lenient<Name>,
    #[serde(rename = "outwardIssue")]
    outward: Lenient<Key>,
    #[serde(rename = "inwardIssue")]
    inward: Lenient<Key>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Comment {
    id: Text,
    author: Lenient<User>,
    body: Text,
    created: Text,
    updated: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CommentBlock {
    comments: Items<Lenient<Comment>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ParentFields {
    issuetype: Lenient<Name>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Parent {
    key: Text,
    fields: Lenient<ParentFields>,
}

/// Reads a `fields` object into [`Picked`]; custom fields by their ids.
pub(super) struct FieldsSeed<'a> {
    pub ids: &'a FieldIds,
}

impl<'de> DeserializeSeed<'de> for FieldsSeed<'_> {
    type Value = Picked;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Picked, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed<'_> {
    type Value = Picked;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("the fields object of a Jira issue")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Picked, A::Error> {
        let ids = self.ids;
        let is = |id: &Option<String>, name: &str| id.as_deref() == Some(name);
        let mut picked = Picked::default();
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            let name = name.as_ref();
            match name {
                "summary" => picked.summary = map.next_value::<Text>()?.0,
                "description" => picked.description = map.next_value::<Text>()?.0,
                "status" => picked.status = map.next_value::<Lenient<Name>>()?.name(),
                "issuetype" => picked.issue_type = map.next_value::<Lenient<Name>>()?.name(),
                "priority" => picked.priority = map.next_value::<Lenient<Name>>()?.name(),
                "assignee" => picked.assignee = map.next_value::<Lenient<User>>()?.login(),
                "reporter" => picked.reporter = map.next_value::<Lenient<User>>()?.login(),
                "labels" => {
                    picked.labels = map
                        .next_value::<Items<Str>>()?
                        .0
                        .map(|labels| labels.into_iter().filter_map(|l| l.0).collect())
                        .unwrap_or_default()
                }
                "duedate" => picked.duedate = map.next_value::<Text>()?.0,
                "created" => picked.created = map.next_value::<Text>()?.0,
                "updated" => picked.updated = map.next_value::<Text>()?.0,
                "issuelinks" => {
                    picked.links = map.next_value::<Items<Lenient<Link>>>()?.0.map(|links| {
                        links
                            .into_iter()
                            .filter_map(|link| {
                                let link = link.0?;
                                Some(LinkParts {
                                    link_type: link.link_type.name()?,
                                    jira_id: link.id.0,
                                    outward: link.outward.0.and_then(|k| k.key.0),
                                    inward: link.inward.0.and_then(|k| k.key.0),
                                })
                            })
                            .collect()
                    })
                }
                "comment" => {
                    picked.comments = map
                        .next_value::<Lenient<CommentBlock>>()?
                        .0
                        .and_then(|block| block.comments.0)
                        .map(|comments| {
                            comments
                                .into_iter()
                                .filter_map(|comment| {
                                    let comment = comment.0?;
                                    Some(MirrorComment {
                                        id: comment.id.0?,
                                        author: comment.author.login(),
                                        body: comment.body.0.unwrap_or_default(),
                                        created: comment.created.0,
                                        updated: comment.updated.0,
                                    })
                                })
                                .collect()
                        })
                }
                "parent" => {
                    picked.parent = map.next_value::<Lenient<Parent>>()?.0.map(|parent| {
                        (
                            parent.key.0,
                            parent.fields.0.and_then(|f| f.issuetype.name()),
                        )
                    })
                }
                _ if is(&ids.epic_link, name) => picked.epic_link = map.next_value::<Text>()?.0,
                _ if is(&ids.sprint, name) => {
                    let value: Value = map.next_value()?;
                    picked.sprint = (!value.is_null()).then_some(value);
                }
                _ if is(&ids.plan_start, name) => picked.plan_start = map.next_value::<Text>()?.0,
                _ if is(&ids.plan_end, name) => picked.plan_end = map.next_value::<Text>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(picked)
    }
}
