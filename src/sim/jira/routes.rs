//! The router: which endpoint a request asks for, and the handler that answers it.

use super::*;
use axum::http::Method;

/// What a request asks for; faults and counters are kept per endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    ServerInfo,
    Myself,
    /// `GET /rest/api/2/search` (DC; 410 on Cloud).
    Search,
    /// `GET /rest/api/2/search/jql` (Cloud).
    SearchJql,
    GetIssue,
    CreateIssue,
    EditIssue,
    GetTransitions,
    DoTransition,
    CreateLink,
    LinkTypes,
    GetComments,
    AddComment,
    /// `POST /rest/api/2/comment/list` (Cloud: "Get comments by IDs").
    CommentsByIds,
    Board,
    Boards,
    Sprints,
    AddToSprint,
    /// `GET /rest/api/2/issue/{key}/properties/{propertyKey}`.
    GetIssueProperty,
    /// `PUT /rest/api/2/issue/{key}/properties/{propertyKey}`.
    SetIssueProperty,
    /// `GET /rest/api/2/comment/{id}/properties/{propertyKey}`.
    GetCommentProperty,
    /// `PUT /rest/api/2/comment/{id}/properties/{propertyKey}`.
    SetCommentProperty,
    /// `GET /rest/api/2/project/{key}` (the preflight's reads below are all read-only).
    Project,
    /// `GET /rest/api/2/project/{key}/statuses`.
    ProjectStatuses,
    /// `GET /rest/api/2/mypermissions`.
    MyPermissions,
    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes`.
    CreateMetaTypes,
    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes/{typeId}`.
    CreateMetaFields,
    /// `GET /rest/api/2/field`.
    Fields,
    /// `GET /rest/api/2/priority`.
    Priorities,
    /// `GET /rest/api/2/issue/{key}/editmeta`.
    EditMeta,
    /// `GET /rest/api/2/issue/{key}/changelog` (Cloud: the paged changelog).
    Changelog,
    Other,
    /// In [`FakeJira::fault`]: any endpoint.
    Any,
}

impl Endpoint {
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Endpoint::CreateIssue
                | Endpoint::EditIssue
                | Endpoint::DoTransition
                | Endpoint::CreateLink
                | Endpoint::AddComment
                | Endpoint::AddToSprint
                | Endpoint::SetIssueProperty
                | Endpoint::SetCommentProperty
        )
    }
}

pub(super) fn classify(method: &Method, segments: &[&str]) -> Endpoint {
    let get = method == Method::GET;
    let post = method == Method::POST;
    match segments {
        ["rest", "api", "2" | "latest", rest @ ..] => match rest {
            ["issue", "createmeta", _, "issuetypes"] if get => Endpoint::CreateMetaTypes,
            ["issue", "createmeta", _, "issuetypes", _] if get => Endpoint::CreateMetaFields,
            ["project", _] if get => Endpoint::Project,
            ["project", _, "statuses"] if get => Endpoint::ProjectStatuses,
            ["mypermissions"] if get => Endpoint::MyPermissions,
            ["field"] if get => Endpoint::Fields,
            ["priority"] if get => Endpoint::Priorities,
            ["issue", _, "editmeta"] if get => Endpoint::EditMeta,
            ["issue", _, "changelog"] if get => Endpoint::Changelog,
            ["serverInfo"] if get => Endpoint::ServerInfo,
            ["myself"] if get => Endpoint::Myself,
            ["search"] if get || post => Endpoint::Search,
            ["search", "jql"] if get || post => Endpoint::SearchJql,
            ["issue"] if post => Endpoint::CreateIssue,
            ["issue", _] if get => Endpoint::GetIssue,
            ["issue", _] if method == Method::PUT => Endpoint::EditIssue,
            ["issue", _, "transitions"] if get => Endpoint::GetTransitions,
            ["issue", _, "transitions"] if post => Endpoint::DoTransition,
            ["issue", _, "comment"] if get => Endpoint::GetComments,
            ["issue", _, "comment"] if post => Endpoint::AddComment,
            ["issueLink"] if post => Endpoint::CreateLink,
            ["issue", _, "properties", _] if get => Endpoint::GetIssueProperty,
            ["issue", _, "properties", _] if method == Method::PUT => Endpoint::SetIssueProperty,
            ["comment", "list"] if post => Endpoint::CommentsByIds,
            ["comment", _, "properties", _] if get => Endpoint::GetCommentProperty,
            ["comment", _, "properties", _] if method == Method::PUT => {
                Endpoint::SetCommentProperty
            }
            ["issueLinkType"] if get => Endpoint::LinkTypes,
            _ => Endpoint::Other,
        },
        ["rest", "agile", "1.0", rest @ ..] => match rest {
            ["board"] if get => Endpoint::Boards,
            ["board", _] if get => Endpoint::Board,
            ["board", _, "sprint"] if get => Endpoint::Sprints,
            ["sprint", _, "issue"] if post => Endpoint::AddToSprint,
            _ => Endpoint::Other,
        },
        _ => Endpoint::Other,
    }
}

impl StateInner {
    pub(super) fn apply(&mut self, endpoint: Endpoint, request: &Request) -> Reply {
        if let Some(reply) = self.refused(endpoint, request) {
            return reply;
        }
        let result = match endpoint {
            Endpoint::ServerInfo => Ok(self.server_info()),
            Endpoint::Myself => Ok(Reply::json(200, self.user_json())),
            Endpoint::Search => self.search_dc(request),
            Endpoint::SearchJql => self.search_cloud(request),
            Endpoint::GetIssue => self.get_issue(request),
            Endpoint::CreateIssue => self.create_issue(request),
            Endpoint::EditIssue => self.edit_issue(request),
            Endpoint::GetTransitions => self.get_transitions(request),
            Endpoint::DoTransition => self.do_transition(request),
            Endpoint::CreateLink => self.create_link(request),
            Endpoint::LinkTypes => Ok(self.link_types()),
            Endpoint::GetComments => self.get_comments(request),
            Endpoint::AddComment => self.add_comment(request),
            Endpoint::CommentsByIds => self.comments_by_ids(request),
            Endpoint::Board => self.board(request),
            Endpoint::Boards => Ok(self.boards(request)),
            Endpoint::Sprints => self.sprints(request),
            Endpoint::AddToSprint => self.add_to_sprint(request),
            Endpoint::GetIssueProperty => self.get_issue_property(request),
            Endpoint::SetIssueProperty => self.set_issue_property(request),
            Endpoint::GetCommentProperty => self.get_comment_property(request),
            Endpoint::SetCommentProperty => self.set_comment_property(request),
            Endpoint::Project => self.project(request),
            Endpoint::ProjectStatuses => self.project_statuses(request),
            Endpoint::MyPermissions => self.my_permissions(request),
            Endpoint::CreateMetaTypes => self.create_meta_types(request),
            Endpoint::CreateMetaFields => self.create_meta_fields(request),
            Endpoint::Fields => Ok(self.fields()),
            Endpoint::Priorities => Ok(self.priorities()),
            Endpoint::EditMeta => self.edit_meta(request),
            Endpoint::Changelog => self.paged_changelog(request),
            Endpoint::Other | Endpoint::Any => Err(Reply::error(
                404,
                &format!("null for uri: {}/{}", self.base, request.segments.join("/")),
            )),
        };
        result.unwrap_or_else(|reply| reply)
    }
}
