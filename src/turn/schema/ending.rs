//! The end of an answer's reply that the schema forces. A part of [`super`] in a file of
//! its own, beside the beginning a turn asked again continues from (`beginning.rs`).

use serde_json::Value;

use super::CallSchema;
use crate::message::AnswerEnd;

impl CallSchema {
    /// What follows an answer's `content` in this schema when nothing after it is the
    /// model's to choose: every later field a string held to nothing (the `thought` of an
    /// answer under [`super::Decide::Probability`]), then the object's close. `None`
    /// where the schema has no answer, or lets the model write something after its
    /// content. Laid out as the prompt's examples are (`", "`, `": "`).
    ///
    /// The backend stops the reply where its content closes and completes it with this
    /// ([`crate::backend::GenOptions::answer_end`]): the grammar would have made the
    /// model write exactly that, a token at a time.
    ///
    /// ```
    /// use toolloop::tools::ToolSpec;
    /// use toolloop::turn::schema::{CallSchema, Decide, Narrowing};
    ///
    /// let schema = CallSchema::answer_only_deciding(Decide::Probability);
    /// let end = schema.answer_end().unwrap();
    /// assert_eq!(end.rest, r#", "thought": ""}"#);
    /// // Reasoning first, the thought comes before the content: nothing is forced after it.
    /// let reason = CallSchema::answer_only_deciding(Decide::Reason);
    /// assert_eq!(reason.answer_end().unwrap().rest, "}");
    /// ```
    pub fn answer_end(&self) -> Option<AnswerEnd> {
        let value = self.as_value();
        let variants = match value["oneOf"].as_array() {
            Some(all) => all.iter().collect(),
            None => vec![value],
        };
        let answer = variants
            .into_iter()
            .find(|v| v["properties"]["kind"]["const"] == "final_answer")?;
        let properties = answer["properties"].as_object()?;
        let after: Vec<(&String, &Value)> = properties
            .iter()
            .skip_while(|(key, _)| key.as_str() != "content")
            .skip(1)
            .collect();
        if !properties.contains_key("content") {
            return None;
        }
        let mut rest = String::new();
        for (key, field) in after {
            let nothing = field["type"] == "string" && field["maxLength"] == 0;
            if !nothing {
                return None;
            }
            rest.push_str(&format!(", {}: \"\"", Value::String(key.clone())));
        }
        rest.push('}');
        Some(AnswerEnd {
            at: crate::turn::answer_stream::content_end,
            rest,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{CallSchema, Decide, Narrowing};
    use crate::tools::ToolSpec;

    #[test]
    fn a_turn_that_may_call_or_answer_ends_its_answer_the_same_way() {
        let tools = [ToolSpec::new(
            "get_weather",
            "Weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )];
        let schema = CallSchema::deciding_calls(&tools, Narrowing::PerTool, Decide::Probability, 4);
        let end = schema.answer_end().expect("an answer is on offer");
        let written = r#"{"kind": "final_answer", "content": "Il pleut à Paris.", "thought": ""}"#;
        // Cut anywhere after its content closed, the reply is completed to what the model
        // would have written; before, it is not complete.
        let closed = written.find(".\"").unwrap() + 2;
        for cut in closed..=written.len() {
            assert_eq!(
                end.complete(&written[..cut]).as_deref(),
                Some(written),
                "{cut}"
            );
        }
        assert_eq!(end.complete(&written[..closed - 1]), None);
    }

    #[test]
    fn a_thought_the_model_may_write_after_its_answer_is_not_forced() {
        let mut schema = CallSchema::answer_only_deciding(Decide::Probability);
        for v in schema.value["oneOf"].as_array_mut().unwrap() {
            if let Some(t) = v["properties"].get_mut("thought") {
                t["maxLength"] = json!(40);
            }
        }
        assert!(schema.answer_end().is_none());
    }
}
