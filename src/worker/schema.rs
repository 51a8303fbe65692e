//! The worker protocol's schema, for `tests/python/test_protocol.py`: each command's wire name,
//! its request's fields and the reply fields kbench reads, each with its type in a small closed
//! vocabulary, the named types they use, the error kinds, the error record's fields and the
//! version. It is derived from the Rust types themselves (schemars reads the same serde
//! attributes serde does) and written to `protocol_schema.json` by the test
//! `the_schema_file_is_current`; tests only, nothing here runs in kbench.
//!
//! Types: `string`, `integer`, `number`, `boolean`, `any` (JSON left as it came), `list<T>`,
//! `map<T>` (an object with string keys), `optional<T>` (may be null or absent), or the name of
//! an entry of `types`: a struct (its fields), an enum (its string values) or a union (objects
//! told apart by the string field `tag`). A field that is not `required` may be left out.

use std::collections::{BTreeMap, BTreeSet};

use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;
use serde_json::{Map, Value};

use super::protocol::{ErrorKind, WorkerError, VERSION};

/// The file's contents.
#[derive(Debug, Serialize)]
pub struct Protocol {
    pub version: u32,
    /// The kinds a worker's error may name (`ErrorKind`; not `other`, which is how kbench reads a
    /// kind it does not know).
    pub error_kinds: Vec<String>,
    /// The fields of a worker's error record (`WorkerError`; `protocol.py`'s `error()`).
    pub error: Vec<Field>,
    pub commands: Vec<Entry>,
    /// The named types the commands' fields use, by name.
    pub types: BTreeMap<String, TypeDef>,
}

/// One command: its wire name, its request's fields, the reply fields kbench reads.
#[derive(Debug, Serialize)]
pub struct Entry {
    pub cmd: String,
    pub request: Vec<Field>,
    pub reply: Vec<Field>,
}

#[derive(Debug, PartialEq, Serialize)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub required: bool,
}

#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TypeDef {
    Struct { fields: Vec<Field> },
    Enum { values: Vec<String> },
    Union { tag: String, variants: Vec<Variant> },
}

/// One shape of a union: its tag's value and its other fields.
#[derive(Debug, PartialEq, Serialize)]
pub struct Variant {
    pub tag: String,
    pub fields: Vec<Field>,
}

/// Collects the commands' types, then the named types they use.
#[derive(Default)]
pub struct Builder {
    generator: SchemaGenerator,
    commands: Vec<Entry>,
    /// Named types met in a field, to be described in `types`.
    named: BTreeSet<String>,
}

impl Builder {
    /// Add the command `cmd`, its request `Q` and its reply `R`.
    pub fn command<Q: JsonSchema, R: JsonSchema>(&mut self, cmd: String) {
        let request = self.generator.subschema_for::<Q>();
        let reply = self.generator.subschema_for::<R>();
        let request = self.fields_of(request.as_value());
        let reply = self.fields_of(reply.as_value());
        self.commands.push(Entry {
            cmd,
            request,
            reply,
        });
    }

    /// The schema: the commands added, the named types they use, the error kinds, the version.
    pub fn finish(mut self) -> Protocol {
        let kinds = self.generator.subschema_for::<ErrorKind>();
        let other = serde_json::to_value(ErrorKind::Other).expect("a unit variant serializes");
        let error_kinds = match self.type_def(&name_of(kinds.as_value())) {
            TypeDef::Enum { mut values } => {
                values.retain(|k| *k != other);
                values.sort();
                values
            }
            def => panic!("ErrorKind is not an enum: {def:?}"),
        };
        let error = self.generator.subschema_for::<WorkerError>();
        let error = self.fields_of(error.as_value());
        let mut types = BTreeMap::new();
        while let Some(name) = self.named.iter().find(|n| !types.contains_key(*n)).cloned() {
            let def = self.type_def(&name);
            types.insert(name, def);
        }
        // The kinds a worker may name, as `error_kinds` says them.
        types.insert(
            "ErrorKind".into(),
            TypeDef::Enum {
                values: error_kinds.clone(),
            },
        );
        Protocol {
            version: VERSION,
            error_kinds,
            error,
            commands: self.commands,
            types,
        }
    }

    /// The definition of the named type `name`, as the generator recorded it.
    fn definition(&self, name: &str) -> Value {
        self.generator
            .definitions()
            .get(name)
            .unwrap_or_else(|| panic!("no definition of {name}"))
            .clone()
    }

    /// The fields of the struct `schema` refers to.
    fn fields_of(&mut self, schema: &Value) -> Vec<Field> {
        match self.type_def(&name_of(schema)) {
            TypeDef::Struct { fields } => fields,
            def => panic!("a request or reply is not a struct: {def:?}"),
        }
    }

    fn type_def(&mut self, name: &str) -> TypeDef {
        let def = self.definition(name);
        if def.get("properties").is_some() || def.get("type") == Some(&"object".into()) {
            return TypeDef::Struct {
                fields: self.fields(&def, None),
            };
        }
        // An enum with a variant left out of the schema (`CheckName::Unknown`) is an `anyOf`.
        let shapes: Vec<Value> = match (def.get("oneOf").or(def.get("anyOf")), def.get("enum")) {
            (Some(Value::Array(shapes)), _) => shapes.clone(),
            (None, Some(_)) => vec![def.clone()],
            _ => panic!("{name}: a type the schema cannot say: {def}"),
        };
        if shapes
            .iter()
            .all(|s| s.get("type") == Some(&"string".into()))
        {
            let values = shapes.iter().flat_map(string_values).collect();
            return TypeDef::Enum { values };
        }
        let tag = union_tag(name, &shapes);
        let variants = shapes
            .iter()
            .map(|shape| Variant {
                tag: shape["properties"][&tag]["const"]
                    .as_str()
                    .expect("a union's tag is a string")
                    .into(),
                fields: self.fields(shape, Some(&tag)),
            })
            .collect();
        TypeDef::Union { tag, variants }
    }

    /// An object schema's fields in their order, but for `skip` (a union's tag).
    fn fields(&mut self, object: &Value, skip: Option<&str>) -> Vec<Field> {
        let required: Vec<&Value> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        let empty = Map::new();
        let properties = object
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        properties
            .iter()
            .filter(|(name, _)| Some(name.as_str()) != skip)
            .map(|(name, schema)| Field {
                name: name.clone(),
                ty: self.ty(schema),
                required: required.contains(&&Value::from(name.as_str())),
            })
            .collect()
    }

    /// A field's type in the vocabulary; a named type it uses is noted for `types`.
    fn ty(&mut self, schema: &Value) -> String {
        // A schema that constrains nothing (annotations aside) is any JSON.
        let annotations = ["description", "default", "title", "examples"];
        let constrains =
            |object: &Map<String, Value>| object.keys().any(|k| !annotations.contains(&k.as_str()));
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(|o| !constrains(o)) {
            return "any".into();
        }
        if schema.get("$ref").is_some() {
            let name = name_of(schema);
            self.named.insert(name.clone());
            return name;
        }
        if let Some(Value::Array(options)) = schema.get("anyOf") {
            let null = serde_json::json!({"type": "null"});
            if options.len() == 2 && options.contains(&null) {
                let some = options.iter().find(|o| **o != null).expect("two options");
                return format!("optional<{}>", self.ty(some));
            }
        }
        match schema.get("type") {
            Some(Value::Array(types)) if types.len() == 2 && types.contains(&"null".into()) => {
                let other = types.iter().find(|t| *t != "null").expect("two types");
                let mut some = schema.clone();
                some["type"] = other.clone();
                format!("optional<{}>", self.ty(&some))
            }
            Some(Value::String(t)) => match t.as_str() {
                "string" | "integer" | "number" | "boolean" => t.clone(),
                "array" => format!("list<{}>", self.ty(&schema["items"])),
                "object" => {
                    let values = schema
                        .get("additionalProperties")
                        .unwrap_or(&Value::Bool(true));
                    format!("map<{}>", self.ty(values))
                }
                _ => panic!("a type the schema cannot say: {schema}"),
            },
            _ => panic!("a type the schema cannot say: {schema}"),
        }
    }
}

/// The name of the type a `$ref` schema refers to.
fn name_of(schema: &Value) -> String {
    let reference = schema["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("not a named type: {schema}"));
    reference.rsplit('/').next().expect("a path").into()
}

/// The values a string schema allows (`enum`, or one `const`).
fn string_values(schema: &Value) -> Vec<String> {
    let values = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(values)), _) => values.clone(),
        (None, Some(value)) => vec![value.clone()],
        _ => panic!("a string that is not an enum's value: {schema}"),
    };
    values
        .iter()
        .map(|v| v.as_str().expect("enum values are strings").into())
        .collect()
}

/// The field every shape of a union fixes to a constant: the tag that tells them apart.
fn union_tag(name: &str, shapes: &[Value]) -> String {
    let first = shapes[0]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name}: a union of non-objects"));
    first
        .iter()
        .map(|(field, _)| field)
        .find(|field| {
            shapes
                .iter()
                .all(|s| s["properties"][field.as_str()].get("const").is_some())
        })
        .unwrap_or_else(|| panic!("{name}: a union without a tag"))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::request::schema;

    fn schema_json() -> String {
        serde_json::to_string_pretty(&schema()).unwrap() + "\n"
    }

    /// `protocol_schema.json` is what `schema()` says (the pytest reads the file). To update
    /// it: `KBENCH_UPDATE_SCHEMA=1 cargo test the_schema_file_is_current`.
    #[test]
    fn the_schema_file_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/worker/protocol_schema.json");
        if std::env::var_os("KBENCH_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, schema_json()).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            stored == schema_json(),
            "{} is stale: KBENCH_UPDATE_SCHEMA=1 cargo test the_schema_file_is_current",
            path.display()
        );
    }

    fn field(name: &str, ty: &str, required: bool) -> Field {
        Field {
            name: name.into(),
            ty: ty.into(),
            required,
        }
    }

    #[test]
    fn the_schema_types_every_command_s_fields() {
        let protocol = schema();
        let entry = |cmd: &str| protocol.commands.iter().find(|e| e.cmd == cmd).unwrap();
        let setup = &entry("time_setup").request;
        assert!(setup.contains(&field("seed", "integer", true)));
        assert!(setup.contains(&field("mode", "TimingMode", true)));
        assert!(setup.contains(&field("arm", "optional<TimingArm>", false)));
        let time = &entry("time").reply;
        assert!(time.contains(&field("sm_mhz", "list<optional<number>>", false)));
        let load = &entry("load");
        assert!(load.request.contains(&field("set", "map<any>", true)));
        assert!(load.reply.contains(&field("checks", "list<Check>", false)));
        assert!(entry("check_files").request == [field("files", "list<string>", true)]);
        let names: BTreeSet<&str> = protocol.commands.iter().map(|e| &*e.cmd).collect();
        assert_eq!(
            names.len(),
            protocol.commands.len(),
            "each wire name is one command's"
        );
        assert_eq!(
            protocol.types["TimingArm"],
            TypeDef::Enum {
                values: vec!["compile".into(), "control".into()]
            }
        );
        let TypeDef::Union { tag, variants } = &protocol.types["Variant"] else {
            panic!("{:?}", protocol.types["Variant"]);
        };
        assert_eq!(tag, "kind");
        let scaled = variants.iter().find(|v| v.tag == "scaled").unwrap();
        assert_eq!(scaled.fields, [field("factor", "number", true)]);
        assert!(protocol.error_kinds.contains(&"oom".to_string()));
        assert!(protocol.error.contains(&field("kind", "ErrorKind", true)));
        assert!(protocol
            .error
            .contains(&field("drift", "optional<string>", false)));
        assert!(protocol
            .error
            .contains(&field("check", "optional<CheckName>", false)));
        assert!(!protocol.error_kinds.contains(&"other".to_string()));
        assert_eq!(protocol.version, VERSION);
    }
}
